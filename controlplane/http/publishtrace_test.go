package http_test

import (
	"context"
	"encoding/hex"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/sluicegw/sluice/dataplane/tracing"
	"github.com/sluicegw/sluice/dataplane/tracing/tracingtest"
)

// TestPublishSpanLinksRequest: with tracing on, publishing a change over
// the API records a sluice.change.publish span, the child of the API
// request's span, in which the outbox operation is queued; the publisher's
// sluice.publish span, which writes etcd after the request was answered, is
// a trace of its own linked to it, with the etcd write its child. A canary
// promotion is traced the same way.
func TestPublishSpanLinksRequest(t *testing.T) {
	recv := tracingtest.Start(t)
	tp, err := tracing.New(tracing.Config{Endpoint: recv.URL, SampleRatio: 1, Service: "sluice-admin"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	e := newEnv(t, envOptions{tracer: tp.Tracer("sluice-admin")})
	_, ed, ap := e.mustShop()
	v := publishRoutes(t, "shop", ed, ap, "a")
	e.waitPublished("shop", v.Number, 10*time.Second)
	version := strconv.FormatInt(v.Number, 10)

	const wait = 10 * time.Second
	pub := recv.Wait(t, wait, func(s tracingtest.Span) bool { return s.Name == "sluice.change.publish" })
	req := recv.Wait(t, wait, func(s tracingtest.Span) bool { return s.SpanID() == pub.ParentID() })
	if req.Name != "POST /api/v1/namespaces/:ns/changes/:id/publish" || req.TraceID() != pub.TraceID() {
		t.Errorf("sluice.change.publish's parent %q in trace %s, want the API request's span in %s", req.Name, req.TraceID(), pub.TraceID())
	}
	if pub.Attr("sluice.namespace") != "shop" || pub.Attr("sluice.version") != version || pub.Attr("sluice.change") == "" {
		t.Errorf("sluice.change.publish: namespace %q version %q change %q", pub.Attr("sluice.namespace"), pub.Attr("sluice.version"), pub.Attr("sluice.change"))
	}
	if pub.StartTimeUnixNano < req.StartTimeUnixNano || pub.EndTimeUnixNano > req.EndTimeUnixNano {
		t.Error("sluice.change.publish does not end within the request's span")
	}

	op := recv.Wait(t, wait, func(s tracingtest.Span) bool {
		return s.Name == "sluice.publish" && s.Attr("sluice.version") == version && s.Attr("sluice.publish.result") == "published"
	})
	if op.ParentID() != "" || op.TraceID() == pub.TraceID() {
		t.Errorf("sluice.publish: parent %q, trace %s; want the root of a trace of its own", op.ParentID(), op.TraceID())
	}
	if len(op.Links) != 1 || hex.EncodeToString(op.Links[0].TraceId) != pub.TraceID() || hex.EncodeToString(op.Links[0].SpanId) != pub.SpanID() {
		t.Errorf("sluice.publish links %v, want one to sluice.change.publish %s/%s", op.Links, pub.TraceID(), pub.SpanID())
	}
	if w := recv.Wait(t, wait, func(s tracingtest.Span) bool { return s.Name == "etcd.write" && s.TraceID() == op.TraceID() }); w.ParentID() != op.SpanID() {
		t.Errorf("etcd.write's parent %s, want sluice.publish %s", w.ParentID(), op.SpanID())
	}

	// A canary, then its promotion: the promotion's outbox operation links
	// to the promote request's span.
	rs, etag := ed.draft("shop")
	rs.Routes = append(rs.Routes, route("b"))
	ed.must(http.StatusOK, "PUT", "/api/v1/namespaces/shop/draft", rs, "If-Match: "+etag)
	var ch struct{ ID int64 }
	ed.must(http.StatusCreated, "POST", "/api/v1/namespaces/shop/changes", map[string]string{"title": "b"}).decode(t, &ch)
	ap.must(http.StatusOK, "POST", "/api/v1/namespaces/shop/changes/"+strconv.FormatInt(ch.ID, 10)+"/approve", map[string]string{"comment": "lgtm"})
	ap.must(http.StatusCreated, "POST", "/api/v1/namespaces/shop/changes/"+strconv.FormatInt(ch.ID, 10)+"/publish",
		map[string]any{"canary": map[string]any{"selector": map[string]string{"zone": "a"}}})
	ap.must(http.StatusOK, "POST", "/api/v1/namespaces/shop/canary/promote", map[string]string{"reason": "fine"})
	promote := recv.Wait(t, wait, func(s tracingtest.Span) bool { return s.Name == "sluice.canary.promote" })
	op = recv.Wait(t, wait, func(s tracingtest.Span) bool {
		return s.Name == "sluice.publish" && s.Attr("sluice.publish.kind") == "promote" && s.Attr("sluice.publish.result") == "published"
	})
	if len(op.Links) != 1 || hex.EncodeToString(op.Links[0].SpanId) != promote.SpanID() {
		t.Errorf("the promotion's sluice.publish links %v, want one to sluice.canary.promote %s", op.Links, promote.SpanID())
	}
}

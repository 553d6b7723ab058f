package etcd_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/sluicegw/sluice/api"
	sluice "github.com/sluicegw/sluice/controlplane"
	"github.com/sluicegw/sluice/controlplane/etcd"
	"github.com/sluicegw/sluice/dataplane/tracing"
	"github.com/sluicegw/sluice/dataplane/tracing/tracingtest"
	"github.com/sluicegw/sluice/etcdwatch/etcdtest"
)

// TestPublishSpans: with a tracer (sluice-admin's --otlp-endpoint), a
// publication is exported to an OTLP receiver as a span with its namespace,
// version and result, whose children are the signing of the value (with
// the key id) and the etcd write (with the key); each child ends within its
// parent.
func TestPublishSpans(t *testing.T) {
	t.Parallel()
	srv := etcdtest.Start(t)
	c, err := etcd.NewClient(srv.Endpoints)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	recv := tracingtest.Start(t)
	tp, err := tracing.New(tracing.Config{Endpoint: recv.URL, SampleRatio: 1, Service: "sluice-admin"})
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Shutdown(context.Background())
	keys := api.Keys{Prefix: "/test-publish-trace"}
	_, signer := newSigner(t, 1)
	ob := &outbox{}
	p := etcd.NewPublisher(etcd.Settings{Client: c, Outbox: ob, Keys: keys, Signer: signer,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Tracer: tp.Tracer("sluice-admin")})
	ob.add(version(t, "shop", 1, 10), sluice.PublishRuleSet, nil)
	p.RunOnce(context.Background())
	if out := ob.last(); out.Err != nil || out.Revision == 0 {
		t.Fatalf("publication: %+v", out)
	}
	pub := recv.Wait(t, 10*time.Second, func(s tracingtest.Span) bool { return s.Name == "sluice.publish" })
	for k, want := range map[string]string{"sluice.namespace": "shop", "sluice.version": "1", "sluice.publish.kind": "ruleset",
		"sluice.publish.result": "published", "sluice.publish.attempt": "1"} {
		if got := pub.Attr(k); got != want {
			t.Errorf("publish span %s = %q, want %q", k, got, want)
		}
	}
	if pub.Attr("etcd.revision") == "0" || pub.ParentID() != "" {
		t.Errorf("publish span: revision %s, parent %q (want a root)", pub.Attr("etcd.revision"), pub.ParentID())
	}
	child := func(name string) tracingtest.Span {
		s := recv.Wait(t, 10*time.Second, func(s tracingtest.Span) bool { return s.Name == name && s.TraceID() == pub.TraceID() })
		if s.ParentID() != pub.SpanID() {
			t.Errorf("%s: parent %s, want the publish span %s", name, s.ParentID(), pub.SpanID())
		}
		if s.StartTimeUnixNano < pub.StartTimeUnixNano || s.EndTimeUnixNano > pub.EndTimeUnixNano {
			t.Errorf("%s does not end within the publish span", name)
		}
		return s
	}
	sign := child("sluice.publish.sign")
	if sign.Attr("sluice.signing_key") != signer.KeyID() || sign.Attr("etcd.key") != keys.RuleSet("shop") {
		t.Errorf("sign span: key id %q, etcd key %q", sign.Attr("sluice.signing_key"), sign.Attr("etcd.key"))
	}
	if w := child("etcd.write"); w.Attr("etcd.key") != keys.RuleSet("shop") {
		t.Errorf("etcd write span: key %q", w.Attr("etcd.key"))
	}
}

package http_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	sluice "github.com/sluicegw/sluice/controlplane"
)

// TestAuditVerifyTruncatedTail: deleting the newest audit events with the
// database owner's rights leaves a chain that still links, and before the
// checkpoint /audit/verify said ok. The head checkpointed in etcd at every
// write exposes it.
func TestAuditVerifyTruncatedTail(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	admin, ed, _ := e.mustShop()
	rs, etag := ed.draft("shop")
	rs.Routes = append(rs.Routes, route("orders"))
	ed.must(http.StatusOK, "PUT", "/api/v1/namespaces/shop/draft", rs, "If-Match: "+etag)

	var v sluice.AuditVerification
	admin.must(http.StatusOK, "GET", "/api/v1/audit/verify", nil).decode(t, &v)
	if !v.OK || !v.Keyed || v.Checkpoint != "matched" || v.CheckpointID != v.HeadID || v.Unkeyed != 0 {
		t.Fatalf("before tampering: %+v", v)
	}
	head := v.HeadID

	for _, q := range []string{
		"ALTER TABLE audit_events DISABLE TRIGGER USER",
		"DELETE FROM audit_events WHERE id > (SELECT max(id) - 3 FROM audit_events)",
		"ALTER TABLE audit_events ENABLE TRIGGER USER",
	} {
		if _, err := e.db.SQL().ExecContext(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// A viewer-level read records no event, so the checkpoint stays ahead.
	admin.must(http.StatusOK, "GET", "/api/v1/audit/verify", nil).decode(t, &v)
	if v.OK || v.Checkpoint != "mismatched" || v.CheckpointID != head || v.HeadID != head-3 ||
		!strings.Contains(v.Reason, "deleted from the end of the log") {
		t.Fatalf("after deleting the tail: %+v", v)
	}
}

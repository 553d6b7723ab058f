package gateway

import (
	"context"
	"strings"
	"testing"

	"github.com/sluicegw/sluice/dataplane/source"
)

// TestApplyRefusesServiceDocument: a kind: service rule set (issue 31) is for
// services running the in-service SDK; a gateway refuses it with an error
// that says so, and keeps serving what it had.
func TestApplyRefusesServiceDocument(t *testing.T) {
	t.Parallel()
	n := New(Config{Listen: "127.0.0.1:0", Admin: "127.0.0.1:0"})
	doc := "namespace: orders-svc\nkind: service\nroutes:\n  - id: create\n    match: {pathPrefix: /api/orders}\n" +
		"limits:\n  - {id: per-user, resources: [orders.Create], key: [sdk:user], algorithm: token_bucket, rate: 10}\n"
	err := n.Apply(context.Background(), source.Update{Data: []byte(doc), Version: 1, Source: "test"})
	if err == nil || !strings.Contains(err.Error(), "kind: service") || !strings.Contains(err.Error(), "not for a gateway") {
		t.Fatalf("Apply = %v; want the kind: service refusal", err)
	}
	if n.Current() != nil {
		t.Fatal("a refused service document was applied")
	}
}

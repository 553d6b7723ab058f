package main

import (
	"net/http"
	"os"
	"strings"
	"testing"
)

// serviceBucketLimit is a cluster limit of the example service naming the
// bucket the gateway's shopBucketRules name, at another rate.
const serviceBucketLimit = `limits:
  - {id: create-per-user, resources: [orders.Create], key: [sdk:user], algorithm: token_bucket,
     rate: 200, period: 1s, burst: 300, scope: cluster, bucket: orders-per-user}
`

// shopBucketRules is a gateway namespace's limit on the shared bucket.
const shopBucketRules = `namespace: shop
routes:
  - id: orders
    match: {pathPrefix: /api/orders}
    upstream:
      targets: [{url: "http://127.0.0.1:8081"}]
limits:
  - {id: per-user, routes: [orders], key: ["header:X-User"], algorithm: token_bucket,
     rate: 300, period: 1s, burst: 300, scope: cluster, bucket: orders-per-user}
`

// TestServiceWorkflow: validate, diff and apply follow a kind: service
// document (the example service's rules) through the built binary, and a
// service limit naming a gateway namespace's bucket with other figures is
// warned about by the server (shared-bucket-mismatch).
func TestServiceWorkflow(t *testing.T) {
	p := startPlane(t)
	p.call(t, p.adminToken, "POST", "/api/v1/namespaces", `{"name":"orders-svc"}`, http.StatusCreated)
	example := "../../../dataplane/sdk/example/orders/rules.yaml"
	src, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}

	r := runCtl(t, nil, "", "validate", example).ok(t)
	if !strings.Contains(r.stdout, "valid (namespace orders-svc, kind service, 3 resources, 1 routes, 4 limits, 1 breakers, 1 degrades)") {
		t.Fatalf("validate: %q", r.stdout)
	}
	r = p.as(t, p.adminToken, "diff", example)
	for _, want := range []string{
		"limit publishes-per-user added: token_bucket 5 per 1s, key [sdk:user], on resources [queue.PublishOrder]",
		"breaker db added: window 10s, open for 5s, on resources [db.InsertOrder]",
		"degrade queue added: manual mode, level 0, on resources [queue.PublishOrder]",
	} {
		if r.code != 2 || !strings.Contains(r.stdout, want) {
			t.Fatalf("diff of the service's first rules: %+v, want exit 2 and %q", r, want)
		}
	}
	publish := func(file, ns, title string) result {
		r := p.as(t, p.adminToken, "apply", file, "--title", title).ok(t)
		id := opened(t, r)
		p.as(t, p.bobToken, "changes", "approve", id, "-n", ns).ok(t)
		p.as(t, p.bobToken, "changes", "publish", id, "-n", ns).ok(t)
		return r
	}
	publish(example, "orders-svc", "orders service rules")
	if r := p.as(t, p.adminToken, "diff", example); r.code != 0 || !strings.Contains(r.stdout, "no differences") {
		t.Fatalf("diff after publishing: %+v", r)
	}

	// The gateway spends the bucket at 300/s; the service's new limit
	// names it at 200/s: two budgets, which the server warns about.
	publish(writeFile(t, "shop.yaml", shopBucketRules), "shop", "shared bucket")
	file := writeFile(t, "orders.yaml", strings.Replace(string(src), "limits:\n", serviceBucketLimit, 1))
	r = p.as(t, p.adminToken, "diff", file)
	if r.code != 2 || !strings.Contains(r.stdout, "limit create-per-user added: token_bucket 200 per 1s, key [sdk:user], cluster-wide in bucket orders-per-user, on resources [orders.Create]") {
		t.Fatalf("diff of a bucket limit: %+v", r)
	}
	r = p.as(t, p.adminToken, "apply", file, "--title", "half a rollout").ok(t)
	if !strings.Contains(r.stdout, "shared-bucket-mismatch") || !strings.Contains(r.stdout, "limit per-user of namespace shop") {
		t.Fatalf("apply did not print the server's bucket warning: %q", r.stdout)
	}
}

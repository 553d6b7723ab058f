package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	grpcstatus "google.golang.org/grpc/status"
)

var (
	exampleOnce sync.Once
	exampleBin  string
	exampleErr  error
)

// mustExample builds the SDK's example orders service (once per test
// binary) next to the harness's binaries; one already in SLUICE_E2E_BIN is
// used as it is.
func mustExample(tb testing.TB) string {
	tb.Helper()
	dir := mustBinaries(tb)
	exampleOnce.Do(func() {
		exampleBin = filepath.Join(dir, "orders-example")
		if os.Getenv("SLUICE_E2E_BIN") != "" {
			if _, err := os.Stat(exampleBin); err == nil {
				return
			}
		}
		root, err := repoRoot()
		if err != nil {
			exampleErr = err
			return
		}
		cmd := exec.Command("go", "build", "-o", exampleBin, "./dataplane/sdk/example/orders")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			exampleErr = fmt.Errorf("go build the example: %v\n%s", err, out)
		}
	})
	if exampleErr != nil {
		tb.Fatal(exampleErr)
	}
	return exampleBin
}

// serviceRules is a kind: service rule set for the example: its gRPC
// health method limited by rule id to burst calls an hour.
func serviceRules(id string, burst int64) string {
	return fmt.Sprintf(`{"namespace": %q, "kind": "service",
  "limits": [{"id": %q, "resources": ["/grpc.health.v1.Health/Check"], "algorithm": "token_bucket", "rate": %d, "period": "1h", "burst": %d}]}`,
		ns, id, burst, burst)
}

// TestSDKService runs the example service (the in-service SDK) against the
// real control plane and etcd: a kind: service rule set published through
// review reaches it (signed, checked against the control plane's key), the
// control plane lists it as a node of kind sdk with the version, and a
// tighter rule set published later is enforced within 1 s: the gRPC
// client sees RESOURCE_EXHAUSTED naming the new rule.
func TestSDKService(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	bin := mustExample(t)
	h.createNamespace()
	v1 := h.mustPublish(serviceRules("health-loose", 1000), "service rules")
	h.waitPublished(v1, 10*time.Second)

	grpcAddr := freeAddr(t)
	svc := &proc{name: "orders-example", bin: bin, log: filepath.Join(h.dir, "orders-example.log"),
		args: []string{"--etcd", h.etcd.Addr(), "--namespace", ns, "--node-id", "orders-e2e", "--trust-keys", h.trustFile,
			"--state-dir", filepath.Join(h.dir, "orders-state"), "--listen", freeAddr(t), "--grpc-listen", grpcAddr}}
	h.procs = append(h.procs, svc)
	svc.start(t)

	// The control plane lists the service: kind sdk, the published version.
	waitFor(t, 15*time.Second, "orders-e2e listed as a node of kind sdk running v1", func() error {
		var nodes struct {
			Items []struct {
				NodeID  string `json:"nodeId"`
				Kind    string `json:"kind"`
				Service string `json:"service"`
				Version int64  `json:"version"`
				Live    bool   `json:"live"`
			} `json:"items"`
		}
		if err := h.author.must(http.StatusOK, "GET", "/api/v1/namespaces/"+ns+"/nodes", nil).decode(&nodes); err != nil {
			return err
		}
		for _, n := range nodes.Items {
			if n.NodeID == "orders-e2e" && n.Kind == "sdk" && n.Service == "orders" && n.Version == v1 && n.Live {
				return nil
			}
		}
		if done, st := svc.exited(); done {
			t.Fatalf("the example exited: %s", st)
		}
		return fmt.Errorf("nodes %+v", nodes.Items)
	})

	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	health := healthpb.NewHealthClient(conn)
	check := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := health.Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}
	for i := range 3 {
		if err := check(); err != nil {
			t.Fatalf("check %d under health-loose: %v", i, err)
		}
	}

	began := time.Now()
	v2 := h.mustPublish(serviceRules("health-tight", 1), "tighter service rules")
	start := time.Now() // the publication's last review step returned
	var last error
	for {
		err := check()
		if grpcstatus.Code(err) == codes.ResourceExhausted {
			if msg := grpcstatus.Convert(err).Message(); !strings.Contains(msg, "health-tight") {
				t.Fatalf("RESOURCE_EXHAUSTED does not name the rule: %q", msg)
			}
			break
		}
		if err != nil && grpcstatus.Code(err) != codes.OK {
			t.Fatalf("check while waiting for v%d: %v", v2, err)
		}
		last = err
		if time.Since(start) > 10*time.Second {
			t.Fatalf("v%d not enforced 10 s after it was published (last %v)", v2, last)
		}
		time.Sleep(10 * time.Millisecond)
	}
	took := time.Since(start)
	t.Logf("v%d enforced by the service %v after its publication through review returned (%v after the draft was saved)", v2, took, time.Since(began))
	if took > time.Second {
		t.Fatalf("v%d enforced after %v, over 1 s", v2, took)
	}
}

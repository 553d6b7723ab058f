package check

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
)

// The repository root, from deploy/check.
const root = "../.."

// need skips t when a tool the check needs is missing, unless
// SLUICE_DEPLOY_CHECK_STRICT is set (scripts/check-deploy.sh, which make test
// runs, sets it: there a missing tool is a failure, not a skip).
func need(t *testing.T, what string) {
	t.Helper()
	if os.Getenv("SLUICE_DEPLOY_CHECK_STRICT") != "" {
		t.Fatalf("%s (SLUICE_DEPLOY_CHECK_STRICT is set)", what)
	}
	t.Skipf("%s; scripts/check-deploy.sh provides it", what)
}

// binaries reads the flags of the built sluice-gateway, sluice-admin (and its
// keygen subcommand) and demo-upstream from $SLUICE_BIN (default bin/, where
// make build puts them).
func binaries(t *testing.T) map[string]*Binary {
	t.Helper()
	dir := os.Getenv("SLUICE_BIN")
	if dir == "" {
		dir = filepath.Join(root, "bin")
	}
	bins := map[string]*Binary{}
	for _, b := range [][]string{{"sluice-gateway"}, {"sluice-admin"}, {"sluice-admin", "keygen"}, {"demo-upstream"}} {
		file := filepath.Join(dir, b[0])
		if _, err := os.Stat(file); err != nil {
			need(t, "no "+file+" (make build)")
		}
		bin, err := ReadBinary(file, b[1:]...)
		if err != nil {
			t.Fatal(err)
		}
		bins[bin.Name] = bin
	}
	return bins
}

func kindsOf(objs []Object) map[string]int {
	n := map[string]int{}
	for _, o := range objs {
		n[o.Kind]++
	}
	return n
}

func TestKubernetesManifests(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(root, "deploy/kubernetes/*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in deploy/kubernetes (%v)", err)
	}
	var applied []Object
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Base(f) == "kustomization.yaml" {
			if err := CheckKustomization(f, data); err != nil {
				t.Error(err)
			}
			continue
		}
		objs, err := DecodeStrict(filepath.Base(f), data)
		if err != nil {
			t.Error(err)
		}
		if filepath.Base(f) != "secret.example.yaml" { // not applied: an example
			applied = append(applied, objs...)
		}
	}
	if err := Consistent(applied); err != nil {
		t.Error(err)
	}
	got := kindsOf(applied)
	for kind, want := range map[string]int{"Deployment": 2, "Service": 3, "PodDisruptionBudget": 2, "Namespace": 1} {
		if got[kind] != want {
			t.Errorf("deploy/kubernetes has %d %s, want %d", got[kind], kind, want)
		}
	}
	n, err := CheckContainers(applied, binaries(t))
	if err != nil {
		t.Error(err)
	}
	if n != 2 {
		t.Errorf("checked the flags of %d containers, want 2 (sluice-admin, sluice-gateway)", n)
	}
	checkScraped(t, applied)
}

// checkScraped checks that deploy/prometheus/prometheus.yml's jobs scrape
// the gateways' admin port and sluice-admin's http port of objs's pods in
// the namespace sluice, and nothing else.
func checkScraped(t *testing.T, objs []Object) {
	t.Helper()
	jobs, err := ScrapeJobs(filepath.Join(root, "deploy/prometheus/prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string][]string{ // job → container → ports
		"sluice-gateway": {"sluice-gateway": {"admin"}},
		"sluice-admin":   {"sluice-admin": {"http"}},
	}
	if len(jobs) != len(want) {
		t.Errorf("prometheus.yml has %d pod jobs, want %d", len(jobs), len(want))
	}
	for _, j := range jobs {
		for _, w := range workloads(objs) {
			got, err := j.Targets(w.pod, "sluice")
			if err != nil {
				t.Fatal(err)
			}
			if exp := want[j.Name][w.pod.Spec.Containers[0].Name]; !slices.Equal(got, exp) {
				t.Errorf("prometheus.yml job %s scrapes ports %v of %s, want %v", j.Name, got, w.obj, exp)
			}
		}
	}
}

// chartCases are the values the chart is rendered with: the defaults, every
// option on, and the gateway as a DaemonSet; want counts the kinds each
// renders.
var chartCases = []struct {
	name   string
	values []string
	want   map[string]int
}{
	{"default", nil, map[string]int{"Deployment": 2, "Service": 3, "PodDisruptionBudget": 2, "ServiceAccount": 2}},
	{"full", []string{"ci/full-values.yaml"}, map[string]int{"Deployment": 2, "Service": 3, "PodDisruptionBudget": 2, "ServiceAccount": 2, "HorizontalPodAutoscaler": 1, "NetworkPolicy": 2}},
	{"daemonset", []string{"ci/daemonset-values.yaml"}, map[string]int{"Deployment": 1, "DaemonSet": 1, "Service": 3, "PodDisruptionBudget": 2, "ServiceAccount": 2, "NetworkPolicy": 2}},
}

const chartDir = root + "/deploy/helm/sluice"

func loadChart(t *testing.T) *Chart {
	t.Helper()
	c, err := LoadChart(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The chart lints clean (as helm lint --strict) and renders (as helm
// template) with each set of values; every object decodes strictly, fits
// with the others, references Secrets instead of holding values, and passes
// the binaries only flags and variables they take.
func TestHelmChart(t *testing.T) {
	c := loadChart(t)
	bins := binaries(t)
	for _, tc := range chartCases {
		t.Run(tc.name, func(t *testing.T) {
			var files []string
			for _, v := range tc.values {
				files = append(files, filepath.Join(chartDir, v))
			}
			vals, err := Values(files)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Lint(vals); err != nil {
				t.Error(err)
			}
			out, err := c.Render(vals)
			if err != nil {
				t.Fatal(err)
			}
			objs, err := DecodeStrict("helm template "+tc.name, out)
			if err != nil {
				t.Error(err)
			}
			if got := kindsOf(objs); !mapsEqual(got, tc.want) {
				t.Errorf("rendered %v, want %v", got, tc.want)
			}
			for _, o := range objs {
				if o.Kind == "Secret" || o.Kind == "ConfigMap" {
					t.Errorf("%s: the chart must reference Secrets, never carry values", o)
				}
			}
			if err := Consistent(objs); err != nil {
				t.Error(err)
			}
			n, err := CheckContainers(objs, bins)
			if err != nil {
				t.Error(err)
			}
			if n != 2 {
				t.Errorf("checked the flags of %d containers, want 2", n)
			}
			if _, err := c.Notes(vals); err != nil {
				t.Errorf("NOTES.txt: %v", err)
			}
			checkScraped(t, objs)
			if tc.want["NetworkPolicy"] > 0 {
				checkAdminPortPrivate(t, objs)
			}
		})
	}
}

// checkAdminPortPrivate checks that a NetworkPolicy selects the gateways and
// that none of its ingress rules lets everyone reach their admin port: each
// rule that covers the port (by naming it, or by naming no port) lists peers.
func checkAdminPortPrivate(t *testing.T, objs []Object) {
	t.Helper()
	found := false
	for _, o := range objs {
		np, ok := o.Value.(*networkingv1.NetworkPolicy)
		if !ok || np.Spec.PodSelector.MatchLabels["app.kubernetes.io/name"] != "sluice-gateway" {
			continue
		}
		found = true
		for _, r := range np.Spec.Ingress {
			covers := len(r.Ports) == 0
			for _, p := range r.Ports {
				covers = covers || p.Port == nil || p.Port.String() == "admin" || p.Port.String() == "9901"
			}
			if covers && len(r.From) == 0 {
				t.Errorf("%s: an ingress rule opens the node admin port to everyone", o)
			}
		}
	}
	if !found {
		t.Error("no NetworkPolicy selects the gateways")
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// The chart refuses values that cannot work or that it does not know (a
// misspelt key, by values.schema.json), naming them.
func TestHelmChartRefuses(t *testing.T) {
	c := loadChart(t)
	for _, tc := range []struct {
		set  []string
		want string
	}{
		{[]string{"gateway.kind=StatefulSet"}, "/gateway/kind"},
		{[]string{"gateway.replica=5"}, "replica"},
		{[]string{"admin.pdb.maxUnavailable=true"}, "maxUnavailable"},
		{[]string{"gateway.port=0"}, "port"},
		{[]string{"gateway.kind=DaemonSet", "gateway.hpa.enabled=true"}, "gateway.hpa.enabled needs gateway.kind Deployment"},
		{[]string{"admin.database.existingSecret="}, "admin.database.existingSecret is required"},
		{[]string{"gateway.adminToken.existingSecret="}, "gateway.adminToken.existingSecret is required"},
		{[]string{"etcd.auth.username=sluice"}, "etcd.auth.existingSecret is required"},
	} {
		vals, err := Values(nil, tc.set...)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Render(vals); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--set %v: got %v, want an error saying %q", tc.set, err, tc.want)
		}
	}
	// Lint (which, like helm lint, passes over required and fail) fails on
	// values values.schema.json refuses.
	vals, err := Values(nil, "commonLabels=oops")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Lint(vals); err == nil || !strings.Contains(err.Error(), "commonLabels") {
		t.Errorf("lint with commonLabels a string: got %v, want an error naming it", err)
	}
}

// A numeric image tag from --set (a float to Helm) renders as written.
func TestHelmChartImageTag(t *testing.T) {
	c := loadChart(t)
	vals, err := Values(nil, "image.tag=1.2")
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.Render(vals)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), `image: "registry.example.com/sluice:1.2"`) {
		t.Error("image tag 1.2 not rendered as registry.example.com/sluice:1.2")
	}
}

// The strict decode fails on what the API server would refuse or silently
// drop: a misspelt field, a wrong type, an unknown kind, a duplicate key.
func TestDecodeStrictRefuses(t *testing.T) {
	for _, c := range []struct{ doc, want string }{
		{"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec: {replica: 3}\n", `unknown field "replica"`},
		{"apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {ports: [{port: http}]}\n", "spec.ports"},
		{"apiVersion: policy/v1beta1\nkind: PodDisruptionBudget\nmetadata: {name: x}\n", "no k8s.io/api type"},
		{"apiVersion: v1\nkind: Service\nmetadata: {name: x, name: y}\n", `key "name" already set`},
		{"apiVersion: v1\nkind: ServiceAccount\nmetadata: {}\n", "no metadata.name"},
	} {
		_, err := DecodeStrict("case", []byte(c.doc))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want an error containing %q", c.doc, err, c.want)
		}
	}
	objs, err := DecodeStrict("ok", []byte("# a comment only\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {name: a}\n---\n"))
	if err != nil || len(objs) != 1 {
		t.Errorf("comments-only documents: got %v, %v; want one object", objs, err)
	}
}

// Consistent catches objects that decode but do not fit together.
func TestConsistentRefuses(t *testing.T) {
	const pod = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: gw}
spec:
  selector: {matchLabels: {app: gw}}
  template:
    metadata: {labels: {app: gw}}
    spec:
      automountServiceAccountToken: false
      securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
      containers:
        - name: gw
          command: [/usr/local/bin/sluice-gateway]
          args: [--state-dir=/var/lib/sluice]
          ports: [{name: admin, containerPort: 9901}]
          readinessProbe: {httpGet: {path: /readyz, port: admin}}
          livenessProbe: {httpGet: {path: /healthz, port: admin}}
          resources: {requests: {cpu: 1, memory: 1Gi}, limits: {memory: 1Gi}}
          securityContext: {readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
          volumeMounts: [{name: state, mountPath: /var/lib/sluice}]
      volumes: [{name: state, emptyDir: {}}]
`
	good, err := DecodeStrict("good", []byte(pod))
	if err != nil {
		t.Fatal(err)
	}
	if err := Consistent(good); err != nil {
		t.Fatalf("the good pod: %v", err)
	}
	for _, c := range []struct{ old, new, want string }{
		{"labels: {app: gw}}", "labels: {app: other}}", "does not match the pod labels"},
		{"path: /readyz", "path: /ready", `readinessProbe path "/ready"`},
		{"port: admin}}\n          liveness", "port: adm}}\n          liveness", "port adm is not declared"},
		{"readOnlyRootFilesystem: true", "readOnlyRootFilesystem: false", "readOnlyRootFilesystem"},
		{"runAsNonRoot: true", "runAsNonRoot: false", "runAsNonRoot"},
		{"automountServiceAccountToken: false", "automountServiceAccountToken: true", "automountServiceAccountToken"},
		{"volumeMounts: [{name: state, mountPath: /var/lib/sluice}]", "volumeMounts: []", "--state-dir /var/lib/sluice is not a writable volume mount"},
		{"volumes: [{name: state, emptyDir: {}}]", "volumes: [{name: state, emptyDir: {}}, {name: key, secret: {secretName: k, defaultMode: 0400}}]", "volume key: files of mode 0400"},
		{pod, pod + "---\napiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {selector: {app: gw}, ports: [{name: t, port: 80, targetPort: traffic}]}\n", "targets traffic"},
		{pod, pod + "---\napiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {selector: {app: gw}, ports: [{name: t, port: 9000}]}\n", "targets 9000"},
		{pod, pod + "---\napiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: p}\nspec: {maxUnavailable: 1, selector: {matchLabels: {app: nope}}}\n", "matches no workload"},
		{pod, pod + "---\napiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {name: h}\nspec: {scaleTargetRef: {kind: Deployment, name: nope}, maxReplicas: 2}\n", "scaleTargetRef Deployment/nope"},
	} {
		doc := strings.Replace(pod, c.old, c.new, 1)
		if doc == pod {
			t.Fatalf("case %q changes nothing", c.want)
		}
		objs, err := DecodeStrict("bad", []byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		if err := Consistent(objs); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s → %s: got %v, want an error containing %q", c.old, c.new, err, c.want)
		}
	}
}

// The flag check knows a binary's flags and the variables it reads.
func TestBinaryChecks(t *testing.T) {
	bins := binaries(t)
	gw := bins["sluice-gateway"]
	for _, ok := range []string{"--etcd=x", "--state-dir=/x", "-listen", "value"} {
		if err := gw.CheckArg(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	if err := gw.CheckArg("--statedir=/x"); err == nil {
		t.Error("--statedir: want an error")
	}
	for _, ok := range []string{"SLUICE_ADMIN_TOKEN", "SLUICE_REDIS", "SLUICE_ETCD_PASSWORD", "GOMEMLIMIT"} {
		if err := gw.CheckEnv(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	if err := gw.CheckEnv("SLUICE_DATABASE_URL"); err == nil {
		t.Error("the gateway reads no SLUICE_DATABASE_URL: want an error")
	}
	admin := bins["sluice-admin"]
	for _, ok := range []string{"SLUICE_DATABASE_URL", "SLUICE_BOOTSTRAP_ADMIN_PASSWORD", "SLUICE_SIGNING_KEY_FILE", "SLUICE_AUDIT_KEY"} {
		if err := admin.CheckEnv(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	if err := bins["sluice-admin keygen"].CheckArg("--if-missing"); err != nil {
		t.Error(err)
	}
}

var composeEnv = map[string]string{
	"POSTGRES_PASSWORD":               "check-placeholder",
	"SLUICE_BOOTSTRAP_ADMIN_PASSWORD": "check-placeholder",
	"SLUICE_ADMIN_TOKEN":              "check-placeholder",
	"SLUICE_AUDIT_KEY":                "check-placeholder",
}

func TestCompose(t *testing.T) {
	file := filepath.Join(root, "deploy/compose.yaml")
	p, err := LoadCompose(context.Background(), file, composeEnv)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"postgres", "redis", "etcd", "keygen", "sluice-admin", "upstream", "gateway-1", "gateway-2", "seed"} {
		if _, ok := p.Services[s]; !ok {
			t.Errorf("compose.yaml has no service %s", s)
		}
	}
	n, err := CheckComposeServices(p, binaries(t))
	if err != nil {
		t.Error(err)
	}
	if n != 5 { // keygen, sluice-admin, upstream, gateway-1, gateway-2
		t.Errorf("checked %d services' flags, want 5", n)
	}
	// Each secret the file takes from the environment is required: without
	// it, compose refuses to start, naming it.
	for name := range composeEnv {
		env := map[string]string{}
		for k, v := range composeEnv {
			if k != name {
				env[k] = v
			}
		}
		if _, err := LoadCompose(context.Background(), file, env); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("without %s: got %v, want an error naming it", name, err)
		}
	}
}

// The compose check refuses what the schema and the loader refuse.
func TestComposeRefuses(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ doc, want string }{
		{"services:\n  a:\n    image: x\n    restarts: always\n", "services.a.restarts"},
		{"services:\n  a:\n    image: x\n    depends_on: [b]\n", `depends on undefined service "b"`},
		{"services:\n  a:\n    image: x\n    ports: 80\n", "services.a.ports must be a array"},
	} {
		file := filepath.Join(dir, "compose.yaml")
		if err := os.WriteFile(file, []byte(c.doc), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadCompose(context.Background(), file, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want an error containing %q", c.doc, err, c.want)
		}
	}
}

// defined reads the metric families the binaries' Go source defines.
func defined(t *testing.T) *Defined {
	t.Helper()
	var roots []string
	for _, m := range []string{"api", "controlplane", "dataplane", "etcdwatch"} {
		roots = append(roots, filepath.Join(root, m))
	}
	d, err := DefinedMetrics(roots...)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestDefinedMetrics(t *testing.T) {
	d := defined(t)
	for name, typ := range map[string]string{
		"sluice_requests_total":               "Counter",
		"sluice_request_duration_seconds":     "Histogram",
		"sluice_ruleset_version":              "Gauge",
		"sluice_admin_publish_attempts_total": "Counter",
		"sluice_admin_publish_lag_seconds":    "Histogram",
		"sluice_admin_outbox_depth":           "Gauge",
	} {
		if f, ok := d.Families[name]; !ok || f.Type != typ {
			t.Errorf("%s: got %+v, want a %s", name, f, typ)
		}
	}
	if !d.GoCollector || !d.ProcessCollector {
		t.Error("the Go and process collectors are registered but not seen")
	}
	for _, s := range []string{"sluice_request_duration_seconds_bucket", "sluice_admin_publish_lag_seconds_count", "go_goroutines"} {
		if !d.HasSeries(s) {
			t.Errorf("%s: want a series", s)
		}
	}
	for _, s := range []string{"sluice_requests_total_bucket", "sluice_requests", "sluice_ruleset_versions"} {
		if d.HasSeries(s) {
			t.Errorf("%s: not a series", s)
		}
	}
}

// Every expression of the dashboard and the alerts parses and names only
// metrics the binaries define.
func TestDashboardAndAlerts(t *testing.T) {
	d := defined(t)
	board, err := GrafanaExprs(filepath.Join(root, "deploy/grafana/sluice.json"))
	if err != nil {
		t.Fatal(err)
	}
	alerts, err := AlertExprs(filepath.Join(root, "deploy/prometheus/alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(board) < 10 || len(alerts) < 10 {
		t.Fatalf("read %d board and %d alert expressions; is the reading wrong?", len(board), len(alerts))
	}
	used := map[string]bool{}
	for _, e := range append(board, alerts...) {
		names, err := MetricNames(e)
		if err != nil {
			t.Error(err)
			continue
		}
		if bad := Unknown(names, d); len(bad) > 0 {
			t.Errorf("%s names %v, which no binary defines\n\t%s", e.Where, bad, e.Text)
		}
		for _, n := range names {
			used[n] = true
		}
	}
	// The control plane's publish failures alert reads a counter that must
	// be exposed from start (controlplane/http's TestMetricsAtStart).
	if !used["sluice_admin_publish_attempts_total"] {
		t.Log("sluice_admin_publish_attempts_total is no longer used")
	}
}

// The metric check fails on a name nothing defines, on a histogram suffix
// of a counter, and on an expression that does not parse.
func TestMetricCheckRefuses(t *testing.T) {
	d := defined(t)
	for _, c := range []struct{ expr, want string }{
		{`rate(sluice_request_total[5m])`, "sluice_request_total"},
		{`sum(rate(sluice_requests_total_bucket[5m]))`, "sluice_requests_total_bucket"},
		{`sluice_admin_publish_attempts_total{result="failed"} > 0 and on() absent(sluice_nope)`, "sluice_nope"},
	} {
		names, err := MetricNames(Expr{"case", c.expr})
		if err != nil {
			t.Fatal(err)
		}
		if bad := Unknown(names, d); !slices.Contains(bad, c.want) {
			t.Errorf("%s: unknown %v, want %s among them", c.expr, bad, c.want)
		}
	}
	for _, bad := range []string{`rate(sluice_requests_total[5m]`, `{code="429"}`, `rate(sluice_requests_total[$__rate_interval])`} {
		if _, err := MetricNames(Expr{"case", bad}); err == nil {
			t.Errorf("%s: want an error", bad)
		}
	}
}

func TestMain(m *testing.M) {
	// Helm's engine logs each required/fail it meets at INFO/WARN; the
	// refusal tests meet them on purpose.
	slog.SetDefault(slog.New(slog.DiscardHandler))
	os.Exit(m.Run())
}

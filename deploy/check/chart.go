package check

import (
	"fmt"
	"path"
	"sort"
	"strings"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/engine"
	"helm.sh/helm/v4/pkg/strvals"
)

// The release that Chart.Render renders, as `helm template check CHART
// --namespace sluice --kube-version v1.30.0` names it: the oldest Kubernetes
// the chart supports (Chart.yaml's kubeVersion; the preStop sleep action).
const (
	releaseName      = "check"
	releaseNamespace = "sluice"
	kubeVersion      = "v1.30.0"
)

// capabilities are Helm's default capabilities with kubeVersion.
func capabilities() (*common.Capabilities, error) {
	kv, err := common.ParseKubeVersion(kubeVersion)
	if err != nil {
		return nil, err
	}
	caps := *common.DefaultCapabilities
	caps.KubeVersion = *kv
	return &caps, nil
}

// Chart is a Helm chart read from a directory with Helm's own packages
// (helm.sh/helm/v4, the code of the helm command): lint, values and the
// template engine are Helm's, so what passes here passes `helm lint
// --strict` and `helm template`.
type Chart struct {
	dir   string
	chart *chart.Chart
}

// LoadChart reads the chart in dir as helm does.
func LoadChart(dir string) (*Chart, error) {
	c, err := loader.LoadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("loading the chart %s: %w", dir, err)
	}
	return &Chart{dir: dir, chart: c}, nil
}

// Values reads values files (as `helm --values F` does: later files
// override earlier ones, maps merge) and then applies each KEY=VALUE of set
// (as `helm --set`).
func Values(files []string, set ...string) (map[string]any, error) {
	vals := map[string]any{}
	for _, f := range files {
		v, err := common.ReadValuesFile(f)
		if err != nil {
			return nil, fmt.Errorf("values %s: %w", f, err)
		}
		mergeMaps(vals, v)
	}
	for _, s := range set {
		if err := strvals.ParseInto(s, vals); err != nil {
			return nil, fmt.Errorf("--set %s: %w", s, err)
		}
	}
	return vals, nil
}

// mergeMaps merges src into dst as helm merges values files.
func mergeMaps(dst, src map[string]any) {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				mergeMaps(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
}

// Lint runs helm lint's rules on the chart with vals and fails, as
// `helm lint --strict` does, on any warning or error.
func (c *Chart) Lint(vals map[string]any) error {
	kv, err := common.ParseKubeVersion(kubeVersion)
	if err != nil {
		return err
	}
	l := lint.RunAll(c.dir, vals, releaseNamespace, lint.WithKubeVersion(kv))
	var msgs []string
	for _, m := range l.Messages {
		if m.Severity >= support.WarningSev {
			msgs = append(msgs, m.Error())
		}
	}
	if len(msgs) > 0 {
		return fmt.Errorf("helm lint %s: %s", c.dir, strings.Join(msgs, "; "))
	}
	return nil
}

// Render renders the chart with vals as `helm template` does, for
// Kubernetes kubeVersion (refusing a chart whose kubeVersion that does not
// meet), and returns the manifests as one YAML stream, each document headed
// by its template's name.
func (c *Chart) Render(vals map[string]any) ([]byte, error) {
	caps, err := capabilities()
	if err != nil {
		return nil, err
	}
	if kv := c.chart.Metadata.KubeVersion; kv != "" && !chartutil.IsCompatibleRange(kv, caps.KubeVersion.String()) {
		return nil, fmt.Errorf("chart requires kubeVersion %s, which %s does not meet", kv, caps.KubeVersion.String())
	}
	top, err := util.ToRenderValues(c.chart, vals, common.ReleaseOptions{Name: releaseName, Namespace: releaseNamespace, Revision: 1, IsInstall: true}, caps)
	if err != nil {
		return nil, err
	}
	files, err := engine.Render(c.chart, top)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(files))
	for name := range files {
		if base := path.Base(name); base == "NOTES.txt" || strings.HasPrefix(base, "_") {
			continue
		}
		names = append(names, name)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, name := range names {
		if strings.TrimSpace(files[name]) == "" {
			continue
		}
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", name, files[name])
	}
	return []byte(b.String()), nil
}

// Notes renders the chart's NOTES.txt with vals.
func (c *Chart) Notes(vals map[string]any) (string, error) {
	caps, err := capabilities()
	if err != nil {
		return "", err
	}
	top, err := util.ToRenderValues(c.chart, vals, common.ReleaseOptions{Name: releaseName, Namespace: releaseNamespace, Revision: 1, IsInstall: true}, caps)
	if err != nil {
		return "", err
	}
	files, err := engine.Render(c.chart, top)
	if err != nil {
		return "", err
	}
	for name, text := range files {
		if path.Base(name) == "NOTES.txt" {
			return text, nil
		}
	}
	return "", fmt.Errorf("the chart has no NOTES.txt")
}

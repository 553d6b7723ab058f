package check

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

// Expr is one PromQL expression and where it was found.
type Expr struct {
	Where string
	Text  string
}

// grafanaDurations are Grafana's interval variables; each stands for a
// duration, so an expression using one parses once it is replaced.
var grafanaDurations = regexp.MustCompile(`\$__(rate_interval|interval|range)\b|\$\{__(rate_interval|interval|range)\}`)

// labelValues is a Grafana templating query over Prometheus:
// label_values(SELECTOR, LABEL).
var labelValues = regexp.MustCompile(`^\s*label_values\((.*),\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)\s*$`)

// GrafanaExprs returns every PromQL expression of the Grafana dashboard at
// file: each panel target's expr (rows and nested panels included), and the
// selector of each label_values(...) templating query. Grafana's interval
// variables become 5m; other variables ($instance) sit inside label matcher
// strings, where the parser takes them as text.
func GrafanaExprs(file string) ([]Expr, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var board struct {
		Panels     []grafanaPanel `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &board); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	var exprs []Expr
	var walk func([]grafanaPanel)
	walk = func(ps []grafanaPanel) {
		for _, p := range ps {
			for _, t := range p.Targets {
				if t.Expr != "" {
					exprs = append(exprs, Expr{fmt.Sprintf("%s panel %q target %s", file, p.Title, t.RefID), grafanaDurations.ReplaceAllString(t.Expr, "5m")})
				}
			}
			walk(p.Panels)
		}
	}
	walk(board.Panels)
	for _, v := range board.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(string)
		if m, ok := v.Query.(map[string]any); ok {
			q, _ = m["query"].(string)
		}
		sub := labelValues.FindStringSubmatch(q)
		if sub == nil {
			return nil, fmt.Errorf("%s: templating variable %q: query %q is not label_values(SELECTOR, LABEL), the one form this check reads", file, v.Name, q)
		}
		exprs = append(exprs, Expr{fmt.Sprintf("%s templating variable %q", file, v.Name), sub[1]})
	}
	return exprs, nil
}

type grafanaPanel struct {
	Title   string `json:"title"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []grafanaPanel `json:"panels"`
}

// AlertExprs parses the Prometheus rule file at file as Prometheus does
// (rulefmt: unknown fields, duplicate rules, bad templates and expressions
// that do not parse are errors) and returns every rule's expression.
func AlertExprs(file string) ([]Expr, error) {
	groups, errs := rulefmt.ParseFile(file, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s: %w", file, errors.Join(errs...))
	}
	var exprs []Expr
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			name := r.Alert
			if name == "" {
				name = r.Record
			}
			exprs = append(exprs, Expr{fmt.Sprintf("%s group %q rule %q", file, g.Name, name), r.Expr})
		}
	}
	return exprs, nil
}

// MetricNames parses e with Prometheus's PromQL parser and returns the metric
// names its selectors name, sorted. A selector without a metric name (only
// label matchers, or a regular expression on __name__) is an error: nothing
// could then tell whether it selects anything.
func MetricNames(e Expr) ([]string, error) {
	ast, err := parser.NewParser(parser.Options{}).ParseExpr(e.Text)
	if err != nil {
		return nil, fmt.Errorf("%s: %w\n\t%s", e.Where, err, e.Text)
	}
	set := map[string]bool{}
	var errs []error
	parser.Inspect(ast, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		for _, m := range vs.LabelMatchers {
			if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
				name = m.Value
			}
		}
		if name == "" {
			errs = append(errs, fmt.Errorf("%s: selector %s names no metric", e.Where, vs))
			return nil
		}
		set[name] = true
		return nil
	})
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, errors.Join(errs...)
}

// prometheusSeries are the series Prometheus itself writes for every
// target and alert, which no binary defines.
var prometheusSeries = map[string]bool{
	"up": true, "scrape_duration_seconds": true, "scrape_samples_scraped": true,
	"scrape_samples_post_metric_relabeling": true, "scrape_series_added": true,
	"ALERTS": true, "ALERTS_FOR_STATE": true,
}

// Unknown returns the names in used that are neither series of defined nor
// ones Prometheus writes itself.
func Unknown(used []string, defined *Defined) []string {
	var out []string
	for _, n := range used {
		if !prometheusSeries[n] && !defined.HasSeries(n) {
			out = append(out, n)
		}
	}
	return out
}

// HasSeries reports whether name is a series of a defined family: the family
// itself, or for a histogram its _bucket, _sum and _count series, for a
// summary its _sum and _count; go_ and process_ series when the Go and
// process collectors are registered.
func (d *Defined) HasSeries(name string) bool {
	if _, ok := d.Families[name]; ok {
		return true
	}
	for _, s := range []struct {
		suffix string
		kinds  []string
	}{{"_bucket", []string{"Histogram"}}, {"_sum", []string{"Histogram", "Summary"}}, {"_count", []string{"Histogram", "Summary"}}} {
		if base, ok := strings.CutSuffix(name, s.suffix); ok {
			if f, ok := d.Families[base]; ok && contains(s.kinds, f.Type) {
				return true
			}
		}
	}
	return d.GoCollector && strings.HasPrefix(name, "go_") || d.ProcessCollector && strings.HasPrefix(name, "process_")
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

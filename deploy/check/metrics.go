package check

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
)

// Family is a metric family a binary defines.
type Family struct {
	Name string
	Type string // Counter, Gauge, Histogram, Summary, Untyped
	At   string // file:line of the definition
}

// Defined is every metric family defined in Go source.
type Defined struct {
	Families                      map[string]Family
	GoCollector, ProcessCollector bool
}

// DefinedMetrics reads every non-test Go file under roots and collects the
// metric families defined there: each prometheus.CounterOpts, GaugeOpts,
// HistogramOpts, SummaryOpts or UntypedOpts composite literal (its full name
// from Namespace, Subsystem and Name, as prometheus.BuildFQName joins them)
// and each prometheus.NewDesc call. A definition whose name is not a string
// literal is an error: this reading cannot see it, so the check would be
// blind to it.
func DefinedMetrics(roots ...string) (*Defined, error) {
	d := &Defined{Families: map[string]Family{}}
	fset := token.NewFileSet()
	var errs []error
	for _, root := range roots {
		err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if e.IsDir() && (e.Name() == "testdata" || e.Name() == "node_modules" || strings.HasPrefix(e.Name(), ".")) {
				return filepath.SkipDir
			}
			if e.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			errs = append(errs, d.collect(fset, f)...)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return d, errors.Join(errs...)
}

func (d *Defined) collect(fset *token.FileSet, f *ast.File) []error {
	prom := importName(f, "github.com/prometheus/client_golang/prometheus", "prometheus")
	coll := importName(f, "github.com/prometheus/client_golang/prometheus/collectors", "collectors")
	if prom == "" && coll == "" {
		return nil
	}
	var errs []error
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CompositeLit:
			typ, ok := selector(n.Type, prom)
			if !ok || !strings.HasSuffix(typ, "Opts") {
				return true
			}
			kind := strings.TrimSuffix(typ, "Opts")
			if !contains([]string{"Counter", "Gauge", "Histogram", "Summary", "Untyped"}, kind) {
				return true
			}
			parts := map[string]string{}
			for _, el := range n.Elts {
				kv, ok := el.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				key, _ := kv.Key.(*ast.Ident)
				if key == nil || !contains([]string{"Namespace", "Subsystem", "Name"}, key.Name) {
					continue
				}
				s, err := stringLit(kv.Value)
				if err != nil {
					errs = append(errs, fmt.Errorf("%s: %s.%s: %w", fset.Position(kv.Pos()), typ, key.Name, err))
					return true
				}
				parts[key.Name] = s
			}
			d.add(Family{Name: fqName(parts["Namespace"], parts["Subsystem"], parts["Name"]), Type: kind, At: fset.Position(n.Pos()).String()}, &errs)
		case *ast.CallExpr:
			fn, ok := selector(n.Fun, prom)
			if ok && fn == "NewDesc" && len(n.Args) > 0 {
				s, err := stringLit(n.Args[0])
				if err != nil {
					errs = append(errs, fmt.Errorf("%s: prometheus.NewDesc: %w", fset.Position(n.Pos()), err))
					return true
				}
				d.add(Family{Name: s, Type: "Untyped", At: fset.Position(n.Pos()).String()}, &errs)
			}
			if fn, ok := selector(n.Fun, coll); ok {
				d.GoCollector = d.GoCollector || fn == "NewGoCollector"
				d.ProcessCollector = d.ProcessCollector || fn == "NewProcessCollector"
			}
		}
		return true
	})
	return errs
}

func (d *Defined) add(f Family, errs *[]error) {
	if f.Name == "" {
		*errs = append(*errs, fmt.Errorf("%s: a %sOpts without a Name", f.At, f.Type))
		return
	}
	d.Families[f.Name] = f
}

// fqName joins a metric name's parts as prometheus.BuildFQName does.
func fqName(namespace, subsystem, name string) string {
	if name == "" {
		return ""
	}
	var parts []string
	for _, p := range []string{namespace, subsystem, name} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, "_")
}

// importName is the name f uses for the package at path ("" when f does
// not import it).
func importName(f *ast.File, path, def string) string {
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == path {
			if imp.Name != nil {
				return imp.Name.Name
			}
			return def
		}
	}
	return ""
}

// selector returns Sel when e is pkg.Sel.
func selector(e ast.Expr, pkg string) (string, bool) {
	s, ok := e.(*ast.SelectorExpr)
	if !ok || pkg == "" {
		return "", false
	}
	x, ok := s.X.(*ast.Ident)
	if !ok || x.Name != pkg {
		return "", false
	}
	return s.Sel.Name, true
}

func stringLit(e ast.Expr) (string, error) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", fmt.Errorf("not a string literal (%T): deploy/check cannot read the metric's name", e)
	}
	return strconv.Unquote(lit.Value)
}

package degrade

import (
	"math"
	"testing"
	"time"

	"github.com/sluicegw/sluice/api"
)

// TestShedOrder checks that level 1 spends its share on the classes of
// shedOrder first, in order: the window's traffic is 30% batch, 50% default
// and 20% critical, shedOrder [batch, default].
func TestShedOrder(t *testing.T) {
	t.Parallel()
	tests := []struct {
		ratio float64
		want  map[string]float64 // share of each class's requests shed
	}{
		{0.5, map[string]float64{"batch": 1, "default": 0.4, "critical": 0}},
		{0.2, map[string]float64{"batch": 2.0 / 3, "default": 0, "critical": 0}},
		{0.9, map[string]float64{"batch": 1, "default": 1, "critical": 0.5}},
	}
	classes := []string{"default", "critical", "batch"}
	mix := []struct {
		class string
		n     int
	}{{"batch", 3000}, {"default", 5000}, {"critical", 2000}}
	for _, tc := range tests {
		t.Run("", func(t *testing.T) {
			t.Parallel()
			rs := &api.RuleSet{Namespace: "t",
				Routes: []api.Route{{ID: "r", Upstream: api.Upstream{Targets: []api.Target{{URL: "http://127.0.0.1:1"}}}}},
				Classes: []api.Class{
					{ID: "critical", Match: api.ClassMatch{Headers: map[string]string{"X-P": "c"}}},
					{ID: "batch", Match: api.ClassMatch{Headers: map[string]string{"X-P": "b"}}},
				},
				Degrades: []api.Degrade{{ID: "d", Mode: api.DegradeManual, Level: 1, Level1ShedRatio: tc.ratio, ShedOrder: []string{"batch", "default"}}},
			}
			v, err := api.Validated(rs)
			if err != nil {
				t.Fatal(err)
			}
			s, err := Compile(v.Rules().Degrades, []string{"r"}, nil, Options{Logger: quiet, Classes: classes})
			if err != nil {
				t.Fatal(err)
			}
			c := s.ForRoute("r")
			win := int64(3 * time.Second)
			run := func(w int64) map[string]float64 {
				shed := map[string]float64{}
				key := uint64(0)
				for _, m := range mix {
					idx := 0
					for i, id := range classes {
						if id == m.class {
							idx = i
						}
					}
					for range m.n {
						key++
						if sh, _ := c.AdmitClass(HashKey(string(rune(key))+m.class), idx, w*win+1); sh {
							shed[m.class]++
						}
					}
					shed[m.class] /= float64(m.n)
				}
				return shed
			}
			run(100) // measured: the plan for the next window
			got := run(101)
			for class, want := range tc.want {
				if math.Abs(got[class]-want) > 0.05 {
					t.Errorf("ratio %v: %s shed %.3f, want %.3f (all: %v)", tc.ratio, class, got[class], want, got)
				}
			}
		})
	}
}

package api

import (
	"strings"
	"testing"
	"time"
)

// TestPreviewReportChecked: a node's report whose preview part carries a
// key longer than the bound, a negative count or too many keys is refused.
func TestPreviewReportChecked(t *testing.T) {
	t.Parallel()
	now := time.Now()
	base := func() *Report {
		return &Report{NodeID: "n1", BootID: "b", Seq: 1, At: now, Preview: &PreviewReport{Change: "42", Checksum: "sha256:x",
			Limits: []PreviewCounts{{Rule: "per-ip", Allowed: 1, Rejected: 2, Clients: 1, TopKeys: []PreviewKey{{Key: "ip=192.0.2.1", Rejected: 2}}}}}}
	}
	if errs := base().Check(now, 0); len(errs) != 0 {
		t.Fatalf("valid report refused: %v", errs)
	}
	withDegrade := base()
	withDegrade.Preview.Degrades = []PreviewDegrade{{Rule: "shed", Level: 2, Shed: 7}}
	if errs := withDegrade.Check(now, 0); len(errs) != 0 {
		t.Fatalf("valid report with a degrade refused: %v", errs)
	}
	saturated := base()
	saturated.Preview.Limits[0].Rejected, saturated.Preview.Limits[0].ShadowRejected = MaxPreviewClients, 5
	saturated.Preview.Limits[0].Clients, saturated.Preview.Limits[0].Saturated = MaxPreviewClients, true
	if errs := saturated.Check(now, 0); len(errs) != 0 {
		t.Fatalf("valid saturated report refused: %v", errs)
	}
	for _, tc := range []struct {
		desc string
		mod  func(*PreviewReport)
		want string
	}{
		{"long key", func(p *PreviewReport) { p.Limits[0].TopKeys[0].Key = strings.Repeat("k", MaxPreviewKeyText+1) }, "topKeys[0]"},
		{"negative", func(p *PreviewReport) { p.Limits[0].Rejected = -1 }, "counts must be >= 0"},
		{"more clients than rejections", func(p *PreviewReport) { p.Limits[0].Clients = 3 }, "limits[0].clients"},
		{"clients over the cap", func(p *PreviewReport) {
			p.Limits[0].Rejected, p.Limits[0].Clients = 2*MaxPreviewClients, MaxPreviewClients+1
		}, "limits[0].clients"},
		{"negative clients", func(p *PreviewReport) { p.Limits[0].Clients = -1 }, "limits[0].clients"},
		{"saturated under the cap", func(p *PreviewReport) { p.Limits[0].Saturated = true }, "limits[0].saturated"},
		{"no change", func(p *PreviewReport) { p.Change = "" }, "preview.change"},
		{"too many keys", func(p *PreviewReport) {
			for range MaxPreviewReportKeys {
				p.Limits[0].TopKeys = append(p.Limits[0].TopKeys, PreviewKey{Key: "k", Rejected: 1})
			}
		}, "more than"},
		{"degrade level 3", func(p *PreviewReport) { p.Degrades = []PreviewDegrade{{Rule: "shed", Level: 3}} }, "degrades[0].level"},
		{"degrade shed negative", func(p *PreviewReport) { p.Degrades = []PreviewDegrade{{Rule: "shed", Shed: -1}} }, "degrades[0].shed"},
		{"degrade twice", func(p *PreviewReport) { p.Degrades = []PreviewDegrade{{Rule: "shed"}, {Rule: "shed"}} }, "degrades[1].rule"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			r := base()
			tc.mod(r.Preview)
			if errs := r.Check(now, 0); !strings.Contains(errs.Error(), tc.want) {
				t.Fatalf("errors %v, want one naming %q", errs, tc.want)
			}
		})
	}
}

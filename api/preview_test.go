package api

import (
	"fmt"
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

// previewSizeReport is a report of a node running 100 limits, each with
// counts, and, with preview, a preview of 100 limits of which busy have
// counts (allowed, and rejected with clients for rejecting of them) and keys
// top keys of 64 bytes, the others left out as a node leaves them out.
func previewSizeReport(preview bool, busy, rejecting, keys int) *Report {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	r := &Report{NodeID: "gateway-eu-west-1a-07", BootID: "9cbe2ec6822ca1e4", BootAt: now.Add(-time.Hour), Seq: 720, At: now,
		IntervalSeconds: 5, Version: 42,
		Requests: RequestCounts{Total: 123456789, Rejected: 1234567, Class2xx: 122222222, Class4xx: 1234567},
		Latency:  LatencyCounts{Bounds: LatencyBounds, Counts: latencyCounts(1234567, 23456789, 123456789)}}
	for i := range 100 {
		r.Limits = append(r.Limits, LimitCounts{Rule: fmt.Sprintf("limit-%03d", i), Allowed: 123456789, Rejected: 1234567})
	}
	if !preview {
		return r
	}
	p := &PreviewReport{Change: "1234", Checksum: "sha256:" + strings.Repeat("ab", 32), Since: now.Add(-10 * time.Minute), Limits: []PreviewCounts{}}
	for i := range 100 {
		c := PreviewCounts{Rule: fmt.Sprintf("limit-%03d", i)}
		if i < busy {
			c.Allowed = 12345678
		}
		if i < rejecting {
			c.Rejected, c.Clients = 123456, 1234
		}
		for j := 0; keys > 0 && j < 5 && i < rejecting; j++ {
			c.TopKeys = append(c.TopKeys, PreviewKey{Key: fmt.Sprintf("%02d%02d", i, j) + strings.Repeat("k", MaxPreviewKeyText-4), Rejected: 12345})
			keys--
		}
		if i < busy {
			p.Limits = append(p.Limits, c) // a node leaves out a limit that decided nothing
		}
	}
	r.Preview = p
	return r
}

// TestPreviewReportSize measures a report with a preview of 100 limits
// against the same report without one (go test -v -run
// TestPreviewReportSize ./api/). The worst case a report allows (every
// preview limit rejecting, 64 keys of 64 bytes) is logged; a preview whose
// limits mostly see no traffic and reject nothing must stay within 2x.
func TestPreviewReportSize(t *testing.T) {
	t.Parallel()
	size := func(r *Report) int {
		b, err := EncodeReport(r)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := DecodeReport(r.NodeID, b, r.At, time.Minute); err != nil {
			t.Fatalf("the measured report does not decode: %v", err)
		}
		return len(b)
	}
	without := size(previewSizeReport(false, 0, 0, 0))
	for _, tc := range []struct {
		desc                  string
		busy, rejecting, keys int
		max                   float64
	}{
		{"worst case: 100 limits with counts and clients, 64 keys of 64 bytes", 100, 100, MaxPreviewReportKeys, 0},
		{"100 limits with counts and clients, no keys", 100, 100, 0, 0},
		{"100 limits allowing, none rejecting", 100, 0, 0, 0},
		{"20 of 100 limits with traffic, 2 rejecting with 10 keys", 20, 2, 10, 2},
		{"no traffic yet", 0, 0, 0, 2},
	} {
		with := size(previewSizeReport(true, tc.busy, tc.rejecting, tc.keys))
		ratio := float64(with) / float64(without)
		t.Logf("%s: %d vs %d bytes without = %.2fx", tc.desc, with, without, ratio)
		if tc.max > 0 && ratio > tc.max {
			t.Errorf("%s: %.2fx the report without a preview, want at most %.1fx", tc.desc, ratio, tc.max)
		}
	}
}

package main

import (
	"testing"
	"time"

	"github.com/sluicegw/sluice/controlplane/cmd/sluicectl/internal/client"
)

func TestOverrideText(t *testing.T) {
	t.Parallel()
	yes, by := true, "admin"
	until := time.Date(2026, 12, 4, 18, 2, 0, 0, time.UTC)
	levels := map[string]int{"orders": 2, "api": 1}
	for _, tc := range []struct {
		desc string
		in   *client.Override
		want string
	}{
		{desc: "none", in: nil, want: ""},
		{desc: "a drain until a time, by whom", in: &client.Override{Drain: &yes, Expires: &until, By: &by}, want: "drain until 2026-12-04 18:02 UTC by admin"},
		{desc: "degrade levels, sorted by rule", in: &client.Override{DegradeLevels: &levels}, want: "degrade api=1,orders=2"},
		{desc: "both", in: &client.Override{Drain: &yes, DegradeLevels: &levels}, want: "drain degrade api=1,orders=2"},
	} {
		if got := overrideText(tc.in); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.desc, got, tc.want)
		}
	}
}

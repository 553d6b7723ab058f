package api

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestValidAddress(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		addr string
		ok   bool
	}{
		{"10.0.0.1:9000", true},
		{"gw-1.eu.internal:443", true},
		{"[::1]:9000", true},
		{"https://gw-1.example.com", true},
		{"http://10.0.0.1:9000/", true},
		{"javascript:alert(1)", false},
		{"javascript://gw:1/%0aalert(1)", false},
		{"data:text/html,<b>x</b>", false},
		{"gw-1", false},
		{"gw-1:0", false},
		{"gw-1:65536", false},
		{"gw-1:09000", false},
		{"<b>x</b>:80", false},
		{"https://user:pw@gw-1", false},
		{"https://gw-1/<script>", false},
		{"", false},
	} {
		if got := ValidAddress(tc.addr); got != tc.ok {
			t.Errorf("ValidAddress(%q) = %v, want %v", tc.addr, got, tc.ok)
		}
	}
}

// TestDecodeRegistration: the red team's forged registrations (a label of
// HTML, an address of javascript:) are refused, naming the field.
func TestDecodeRegistration(t *testing.T) {
	t.Parallel()
	good := NodeStatus{NodeID: "gw-1", Namespace: "shop", Address: "10.0.0.1:9000", AdminAddress: "127.0.0.1:9901",
		Labels: map[string]string{"zone": "a"}, Build: "v1.2.3 (abc)", Version: 3}
	tests := []struct {
		desc string
		edit func(s *NodeStatus)
		want string // "" means accepted
	}{
		{desc: "valid", edit: func(*NodeStatus) {}},
		{desc: "no address (unknown)", edit: func(s *NodeStatus) { s.Address = "" }},
		{desc: "label of HTML", edit: func(s *NodeStatus) { s.Labels = map[string]string{"x": "<b>y</b>"} }, want: `labels."x"`},
		{desc: "address javascript:", edit: func(s *NodeStatus) { s.Address = "javascript:alert(document.cookie)" }, want: "address: must be host:port"},
		{desc: "admin address javascript:", edit: func(s *NodeStatus) { s.AdminAddress = "javascript:alert(1)" }, want: "adminAddress"},
		{desc: "build too long", edit: func(s *NodeStatus) { s.Build = strings.Repeat("b", MaxBuildLength+1) }, want: "build"},
		{desc: "build with control characters", edit: func(s *NodeStatus) { s.Build = "v1\x1b[2J" }, want: "build"},
		{desc: "negative version", edit: func(s *NodeStatus) { s.Version = -1 }, want: "version"},
		{desc: "an sdk node", edit: func(s *NodeStatus) { s.Kind, s.Service, s.Address = NodeKindSDK, "orders", "" }},
		{desc: "unknown kind", edit: func(s *NodeStatus) { s.Kind = "sidecar" }, want: "kind:"},
		{desc: "service of HTML", edit: func(s *NodeStatus) { s.Kind, s.Service = NodeKindSDK, "<b>x</b>" }, want: "service:"},
		{desc: "too many labels", edit: func(s *NodeStatus) {
			s.Labels = map[string]string{}
			for i := range MaxNodeLabels + 1 {
				s.Labels["k"+strings.Repeat("x", i)] = "v"
			}
		}, want: "labels: must hold at most"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			s := good
			tc.edit(&s)
			b, _ := json.Marshal(s)
			_, err := DecodeRegistration("gw-1", b)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("DecodeRegistration: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("DecodeRegistration: %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := DecodeRegistration("gw-1", []byte(`{"build":"`+strings.Repeat("x", MaxRegistrationBytes)+`"}`)); err == nil || !strings.Contains(err.Error(), "bytes, over") {
		t.Errorf("an oversized registration: %v", err)
	}
}

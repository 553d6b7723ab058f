package api

import (
	"fmt"
	"net"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// Registrations are another machine's word like reports: the control plane
// lists a node as live only when its registration passes
// NodeStatus.Check, so a forged registration (a label value of HTML, an
// address of javascript:) is never shown as a node.

// MaxRegistrationBytes bounds a registration value.
const MaxRegistrationBytes = 16 << 10

// MaxBuildLength bounds a registration's build string, in bytes.
const MaxBuildLength = 128

// MaxNodeLabels is the most labels a node's registration holds.
const MaxNodeLabels = 64

// AddressRule says what ValidAddress accepts, for error messages.
const AddressRule = "must be host:port (a DNS name or an IP address, port 1 to 65535) or an http:// or https:// URL"

// ValidAddress reports whether s may be a node's advertised address: host:port
// with a DNS name or an IP literal and a port of 1 to 65535, or an http or
// https URL with such a host (a port optional) and no user information.
func ValidAddress(s string) bool {
	if len(s) == 0 || len(s) > 512 {
		return false
	}
	if strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://") {
		u, err := url.Parse(s)
		if err != nil || u.User != nil || u.Host == "" || u.Opaque != "" || !printable(s) || strings.ContainsAny(s, " <>\"'`\\") {
			return false
		}
		if u.Port() == "" {
			return validHost(u.Hostname())
		}
		return validHostPort(u.Host)
	}
	return validHostPort(s)
}

func validHostPort(s string) bool {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return false
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 || strconv.Itoa(p) != port {
		return false
	}
	return validHost(host)
}

// validHost accepts an IP address or a DNS name of labels of
// [A-Za-z0-9_-] separated by dots.
func validHost(h string) bool {
	if net.ParseIP(h) != nil {
		return true
	}
	if len(h) == 0 || len(h) > 253 {
		return false
	}
	for label := range strings.SplitSeq(strings.TrimSuffix(h, "."), ".") {
		if len(label) == 0 || len(label) > 63 {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// Check returns every problem of a registration: a valid node id and
// namespace (when given), at most MaxNodeLabels labels that ParseLabels
// would accept, an address and an admin address that are empty or
// ValidAddress, a build of at most MaxBuildLength printable bytes, a
// bounded printable lastApplyError, and no negative figure.
func (s *NodeStatus) Check() Errors {
	var errs Errors
	bad := func(path, msg string) { errs = append(errs, FieldError{Path: path, Message: msg}) }
	if !ValidNodeID(s.NodeID) {
		bad("nodeId", NodeIDRule)
	}
	if s.Namespace != "" && !ValidID(s.Namespace) {
		bad("namespace", "must be a valid namespace name")
	}
	if s.Kind != "" && s.Kind != NodeKindSDK {
		bad("kind", fmt.Sprintf("%q is not a node kind (absent for a gateway, or sdk)", s.Kind))
	}
	if s.Service != "" && !ValidID(s.Service) {
		bad("service", "must be a valid service name ([a-z0-9][a-z0-9-]{0,62})")
	}
	if len(s.Labels) > MaxNodeLabels {
		bad("labels", fmt.Sprintf("must hold at most %d labels", MaxNodeLabels))
	} else {
		keys := make([]string, 0, len(s.Labels))
		for k := range s.Labels {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			errs = validateLabel(errs, "labels."+strconv.Quote(k), k, s.Labels[k])
		}
	}
	if s.Address != "" && !ValidAddress(s.Address) {
		bad("address", AddressRule)
	}
	if s.AdminAddress != "" && !ValidAddress(s.AdminAddress) {
		bad("adminAddress", AddressRule)
	}
	if len(s.Build) > MaxBuildLength || !printable(s.Build) {
		bad("build", fmt.Sprintf("must be at most %d bytes of printable UTF-8", MaxBuildLength))
	}
	for _, f := range []struct{ path, v string }{{"checksum", s.Checksum}, {"source", s.Source}} {
		if len(f.v) > 256 || !printable(f.v) {
			bad(f.path, "must be at most 256 bytes of printable UTF-8")
		}
	}
	if len(s.LastApplyError) > MaxApplyErrorLength || !printable(s.LastApplyError) {
		bad("lastApplyError", fmt.Sprintf("must be at most %d bytes of printable UTF-8", MaxApplyErrorLength))
	}
	for _, f := range []struct {
		path string
		v    float64
	}{{"version", float64(s.Version)}, {"signatureRejections", float64(s.SignatureRejections)}, {"rps", s.RPS}, {"rejectRate", s.RejectRate}, {"p99Seconds", s.P99Seconds}} {
		if !(f.v >= 0) { // also NaN
			bad(f.path, "must be >= 0")
		}
	}
	return errs
}

// DecodeRegistration is DecodeNodeStatus, then a size cap
// (MaxRegistrationBytes) and NodeStatus.Check: the registration as the
// control plane accepts it.
func DecodeRegistration(id string, data []byte) (NodeStatus, error) {
	if len(data) > MaxRegistrationBytes {
		return NodeStatus{}, fmt.Errorf("registration of node %q is %d bytes, over %d", id, len(data), MaxRegistrationBytes)
	}
	s, err := DecodeNodeStatus(id, data)
	if err != nil {
		return s, err
	}
	if errs := s.Check(); len(errs) > 0 {
		return s, fmt.Errorf("registration of node %q: %w", id, errs)
	}
	return s, nil
}

package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"
)

// The etcd wire contract between the control plane and the gateway nodes,
// besides the ruleset value (Published, DecodePublished) and the key layout
// (Keys): the canary value, node registrations and overrides, and the rules
// for node ids and labels. Both sides encode, decode and check with these
// functions only.

// PublishedValue is a Published with its rules as stored JSON: what the
// control plane writes (a version's document is stored canonical and
// validated), and the shape DecodePublished reads before checking the rules.
type PublishedValue struct {
	Version     int64           `json:"version"`
	Checksum    string          `json:"checksum"`
	PublishedAt time.Time       `json:"publishedAt"`
	PublishedBy string          `json:"publishedBy"`
	Rules       json.RawMessage `json:"rules"`
}

// Canary is the value of a namespace's canary key (Keys.Canary), written by
// the control plane:
//
//	{"version": 8, "selector": {"zone": "a"}, "published": {<Published of version 8>}}
//
// Nodes whose labels match Selector run Published instead of the namespace's
// published rule set, as long as Version is newer than the published version
// (a canary that the published version has caught up with is over). Deleting
// the key ends the canary: its nodes return to the published version.
type Canary struct {
	Version   int64           `json:"version"`
	Selector  Selector        `json:"selector"`
	Published json.RawMessage `json:"published"`
}

// EncodeCanary is the canary value of version pub.Version for the nodes
// matching sel.
func EncodeCanary(sel Selector, pub PublishedValue) ([]byte, error) {
	doc, err := json.Marshal(pub)
	if err != nil {
		return nil, fmt.Errorf("encoding canary version %d: %w", pub.Version, err)
	}
	return json.Marshal(Canary{Version: pub.Version, Selector: sel, Published: doc})
}

// DecodeCanary reads and checks a canary value: JSON of the Canary shape, a
// positive version, a selector that ValidateSelector accepts, and a
// published document that passes DecodePublished and carries the same
// version.
func DecodeCanary(data []byte) (*Canary, *Published, error) {
	var c Canary
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, nil, fmt.Errorf("canary is not valid JSON: %w", err)
	}
	if c.Version <= 0 {
		return nil, nil, fmt.Errorf("canary has no version (got %d)", c.Version)
	}
	if errs := ValidateSelector(c.Selector); len(errs) > 0 {
		return nil, nil, fmt.Errorf("canary version %d: %w", c.Version, errs)
	}
	if len(c.Published) == 0 || string(c.Published) == "null" {
		return nil, nil, fmt.Errorf("canary version %d carries no published document", c.Version)
	}
	doc, err := DecodePublished(c.Published)
	if err != nil {
		return nil, nil, fmt.Errorf("canary: %w", err)
	}
	if doc.Version != c.Version {
		return nil, nil, fmt.Errorf("canary version %d carries published version %d", c.Version, doc.Version)
	}
	return &c, doc, nil
}

// Selector picks canary nodes by their labels: a node matches when it has
// every label of the selector with exactly that value. An empty selector
// matches no node, so a canary always names the nodes it is for.
type Selector map[string]string

// Matches reports whether labels satisfy the selector.
func (s Selector) Matches(labels map[string]string) bool {
	if len(s) == 0 {
		return false
	}
	for k, v := range s {
		if lv, ok := labels[k]; !ok || lv != v {
			return false
		}
	}
	return true
}

// MaxSelectorLabels is the most labels a canary selector holds.
const MaxSelectorLabels = 16

var (
	labelKey   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/-]{0,62}$`)
	labelValue = regexp.MustCompile(`^[A-Za-z0-9._/-]{1,63}$`)
)

const (
	labelKeyRule   = "label name must be 1 to 63 of [A-Za-z0-9._/-], starting with a letter or digit"
	labelValueRule = "label value must be 1 to 63 of [A-Za-z0-9._/-]"
)

// validateLabel checks one label name and value, adding problems at path.
func validateLabel(errs Errors, path, k, v string) Errors {
	if !labelKey.MatchString(k) {
		errs = append(errs, FieldError{Path: path, Message: labelKeyRule})
	}
	if !labelValue.MatchString(v) {
		errs = append(errs, FieldError{Path: path, Message: labelValueRule})
	}
	return errs
}

// ValidateSelector checks a canary selector: 1 to 16 labels, names of
// [A-Za-z0-9._/-] (at most 63, starting alphanumeric), values of
// [A-Za-z0-9._/-] (at most 63). It returns every problem, with paths under
// "canary.selector".
func ValidateSelector(sel map[string]string) Errors {
	var errs Errors
	switch {
	case len(sel) == 0:
		errs = append(errs, FieldError{Path: "canary.selector", Message: "must hold at least one label (an empty selector matches no node)"})
	case len(sel) > MaxSelectorLabels:
		errs = append(errs, FieldError{Path: "canary.selector", Message: fmt.Sprintf("must hold at most %d labels", MaxSelectorLabels)})
	}
	keys := make([]string, 0, len(sel))
	for k := range sel {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		errs = validateLabel(errs, "canary.selector."+k, k, sel[k])
	}
	return errs
}

// ParseLabels parses a node's labels ("k=v,k2=v2", the gateway's --labels
// flag): each name and value must be one a selector can hold (see
// ValidateSelector), since a label no selector can name would never put the
// node in a canary. Empty input gives no labels.
func ParseLabels(s string) (map[string]string, error) {
	labels := map[string]string{}
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" {
			return nil, fmt.Errorf("parsing labels: %q is not key=value", part)
		}
		if _, dup := labels[k]; dup {
			return nil, fmt.Errorf("parsing labels: %q given twice", k)
		}
		if errs := validateLabel(nil, k, k, v); len(errs) > 0 {
			return nil, fmt.Errorf("parsing labels: %q: %s", part, errs[0].Message)
		}
		labels[k] = v
	}
	return labels, nil
}

// MaxNodeIDLength is the longest node id.
const MaxNodeIDLength = 128

// NodeIDRule says what ValidNodeID accepts, for error messages.
const NodeIDRule = "must be 1 to 128 of [A-Za-z0-9._-]"

// ValidNodeID reports whether id may name a node: 1 to 128 of
// [A-Za-z0-9._-]. It is the last segment of the registration and override
// keys (Keys.Node, Keys.Override).
func ValidNodeID(id string) bool {
	if len(id) == 0 || len(id) > MaxNodeIDLength {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// ValidateNodeID is ValidNodeID as an error that names the id and the rule.
func ValidateNodeID(id string) error {
	if !ValidNodeID(id) {
		return fmt.Errorf("invalid node id %q: %s", id, NodeIDRule)
	}
	return nil
}

// DecodeNodeStatus reads a node's registration found under the key of node
// id (its NodeID is taken from the key, not from the value). The caller
// checks that it is bound to a lease.
func DecodeNodeStatus(id string, data []byte) (NodeStatus, error) {
	var s NodeStatus
	if err := ValidateNodeID(id); err != nil {
		return s, err
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return s, fmt.Errorf("registration of node %q is not valid JSON: %w", id, err)
	}
	s.NodeID = id
	return s, nil
}

// Validate checks an override's fields and returns every problem: each
// forced degrade level must be 0, 1 or 2.
func (o Override) Validate() Errors {
	ids := make([]string, 0, len(o.DegradeLevels))
	for id := range o.DegradeLevels {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var errs Errors
	for _, id := range ids {
		if lvl := o.DegradeLevels[id]; lvl < 0 || lvl > 2 {
			errs = append(errs, FieldError{Path: "degradeLevels." + id, Message: "must be 0, 1 or 2"})
		}
	}
	return errs
}

// DecodeOverride reads an override value strictly (an unknown field is an
// error: a node must not half-apply an instruction it does not understand)
// and checks it (Override.Validate).
func DecodeOverride(data []byte) (Override, error) {
	var o Override
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		return Override{}, fmt.Errorf("override is not valid JSON: %w", err)
	}
	if errs := o.Validate(); len(errs) > 0 {
		return Override{}, fmt.Errorf("override: %w", errs)
	}
	return o, nil
}

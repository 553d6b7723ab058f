package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// MaxPreviewDuration is the longest a preview runs.
const MaxPreviewDuration = 30 * time.Minute

// MaxPreviewKeyText is the longest key text a preview report carries.
const MaxPreviewKeyText = 64

// Preview is the value at Keys.Preview(ns): a proposed change's rule set that
// the matching nodes run in shadow beside the live rules until Until (see
// DESIGN.md "Impact preview and replay"). It is signed like a rule set.
type Preview struct {
	// Change is the change's id, Checksum its rule set's checksum.
	Change   string `json:"change"`
	Checksum string `json:"checksum"`
	// Rules is the change's rule set document (JSON).
	Rules json.RawMessage `json:"rules"`
	// Until is when the preview ends; nodes drop it then.
	Until time.Time `json:"until"`
	// Selector picks the nodes that run it by label; empty: every node.
	Selector Selector `json:"selector,omitempty"`
	// Since is when it was started, By who started it (for the record;
	// nodes ignore both).
	Since time.Time `json:"since,omitzero"`
	By    string    `json:"by,omitempty"`
}

// Preview is the key of a namespace's preview (at most one at a time).
func (k Keys) Preview(ns string) string { return k.Namespace(ns) + "preview" }

// DecodePreview reads and checks a preview value: JSON of the Preview shape,
// a change id, a checksum, a valid selector, an Until, and rules that
// decode and validate; it returns the validated rules too. Whether Until
// has passed is the caller's to judge.
func DecodePreview(data []byte) (*Preview, *Valid, error) {
	var p Preview
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, nil, fmt.Errorf("preview is not valid JSON: %w", err)
	}
	switch {
	case p.Change == "":
		return nil, nil, errors.New("preview: change is empty")
	case p.Checksum == "":
		return nil, nil, errors.New("preview: checksum is empty")
	case p.Until.IsZero():
		return nil, nil, errors.New("preview: until is missing")
	case len(p.Rules) == 0:
		return nil, nil, errors.New("preview: rules are missing")
	}
	if len(p.Selector) == 0 {
		p.Selector = nil
	} else if errs := ValidateSelector(p.Selector); len(errs) > 0 {
		return nil, nil, fmt.Errorf("preview selector: %w", errs)
	}
	rs, err := Decode(p.Rules)
	if err != nil {
		return nil, nil, fmt.Errorf("preview rules: %w", err)
	}
	v, err := Validated(rs)
	if err != nil {
		return nil, nil, fmt.Errorf("preview rules: %w", err)
	}
	return &p, v, nil
}

// PreviewReport is what one node saw of the preview it runs, carried in its
// Report: the preview's limits' decisions on the node's live traffic since
// the node started the preview. Approximate says some limit is cluster scope
// and was evaluated locally (its rate divided by the live nodes).
type PreviewReport struct {
	Change      string          `json:"change"`
	Checksum    string          `json:"checksum"`
	Since       time.Time       `json:"since"`
	Approximate bool            `json:"approximate,omitempty"`
	Limits      []PreviewCounts `json:"limits"`
	// Degrades are the preview's degrade plans, run in shadow on the same
	// traffic (absent when the change has none).
	Degrades []PreviewDegrade `json:"degrades,omitempty"`
}

// PreviewDegrade is one of the preview's degrade plans on one node: the
// level it is at now (0, 1 or 2; what its triggers make of the live
// traffic, or its manual level) and the requests it would have shed since
// the preview started.
type PreviewDegrade struct {
	Rule  string `json:"rule"`
	Level int    `json:"level"`
	Shed  int64  `json:"shed"`
}

// PreviewCounts are one preview limit's decisions and the keys it rejected
// most (key text at most MaxPreviewKeyText bytes; header, query, cookie and
// claim values appear hashed, as in the decision log). A zero count is
// left out of the JSON, and a node leaves out a limit that decided nothing
// (the control plane sums counts by rule id, so an absent limit counts
// zero): a report with a preview stays small.
type PreviewCounts struct {
	Rule           string       `json:"rule"`
	Allowed        int64        `json:"allowed,omitempty"`
	Rejected       int64        `json:"rejected,omitempty"`
	ShadowRejected int64        `json:"shadowRejected,omitempty"`
	TopKeys        []PreviewKey `json:"topKeys,omitempty"`
	// Clients is the distinct keys the limit rejected (or shadow-rejected),
	// counted exactly up to MaxPreviewClients; Saturated says the node
	// reached the cap and stopped counting new keys.
	Clients   int64 `json:"clients,omitempty"`
	Saturated bool  `json:"saturated,omitempty"`
}

// MaxPreviewClients bounds the distinct rejected keys a node counts per
// preview limit.
const MaxPreviewClients = 10000

// MaxPreviewReportKeys bounds the top keys of one PreviewReport, across its
// limits (the keys rejected most are kept), so that a report with a preview
// stays well within MaxReportBytes.
const MaxPreviewReportKeys = 64

// check returns the problems of a preview report read from a node: a
// change id and checksum of printable text at most 128 bytes, valid unique
// rule ids, no negative count, distinct clients at most the limit's
// rejections and MaxPreviewClients (saturated only at the cap), key text of at most MaxPreviewKeyText bytes,
// at most MaxPreviewReportKeys keys, and degrade levels 0 to 2.
func (p *PreviewReport) check(path string) Errors {
	var errs Errors
	bad := func(at, msg string) { errs = append(errs, FieldError{Path: path + at, Message: msg}) }
	if p.Change == "" || len(p.Change) > 128 || !printable(p.Change) {
		bad(".change", "must be 1 to 128 bytes of printable UTF-8")
	}
	if len(p.Checksum) > 128 || !printable(p.Checksum) {
		bad(".checksum", "must be at most 128 bytes of printable UTF-8")
	}
	seen, keys := map[string]bool{}, 0
	for i, l := range p.Limits {
		at := fmt.Sprintf(".limits[%d]", i)
		if !ValidID(l.Rule) || seen[l.Rule] {
			bad(at+".rule", fmt.Sprintf("rule id %q is not valid or is repeated", l.Rule))
		}
		seen[l.Rule] = true
		if l.Allowed < 0 || l.Rejected < 0 || l.ShadowRejected < 0 {
			bad(at, "counts must be >= 0")
		}
		if l.Clients < 0 || l.Clients > MaxPreviewClients || l.Clients > l.Rejected+l.ShadowRejected {
			bad(at+".clients", fmt.Sprintf("must be 0 to %d and at most the limit's rejections", MaxPreviewClients))
		}
		if l.Saturated && l.Clients != MaxPreviewClients {
			bad(at+".saturated", fmt.Sprintf("only at %d clients", MaxPreviewClients))
		}
		for j, k := range l.TopKeys {
			keys++
			if len(k.Key) > MaxPreviewKeyText || !utf8.ValidString(k.Key) || k.Rejected < 0 {
				bad(fmt.Sprintf("%s.topKeys[%d]", at, j), fmt.Sprintf("key must be at most %d bytes of UTF-8, its count >= 0", MaxPreviewKeyText))
			}
		}
	}
	if keys > MaxPreviewReportKeys {
		bad(".limits", fmt.Sprintf("carries %d top keys, more than %d", keys, MaxPreviewReportKeys))
	}
	seen = map[string]bool{}
	for i, d := range p.Degrades {
		at := fmt.Sprintf(".degrades[%d]", i)
		if !ValidID(d.Rule) || seen[d.Rule] {
			bad(at+".rule", fmt.Sprintf("rule id %q is not valid or is repeated", d.Rule))
		}
		seen[d.Rule] = true
		if d.Level < 0 || d.Level > 2 {
			bad(at+".level", "must be 0, 1 or 2")
		}
		if d.Shed < 0 {
			bad(at+".shed", "must be >= 0")
		}
	}
	return errs
}

// PreviewKey is one key's rejections by a preview limit. The counts are
// those of the sampled decision log (a limit's rejection lines are rate
// bounded), so they rank keys; Rejected in PreviewCounts is exact.
type PreviewKey struct {
	Key      string `json:"key"`
	Rejected int64  `json:"rejected"`
}

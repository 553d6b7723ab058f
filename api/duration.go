package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Duration is a time.Duration written as a Go duration string ("500ms", "1m30s")
// in rule documents. The zero value is zero.
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String formats d like time.Duration.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON writes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a duration string such as "1s".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string such as \"1s\"")
	}
	v, err := ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// ParseDuration parses a non-negative Go duration string. It exists so that
// every part reads durations with the same rules and messages.
func ParseDuration(s string) (time.Duration, error) {
	if strings.HasPrefix(s, "-") {
		// Even "-0": a sign that says negative is a mistake, and the JSON
		// Schema's duration pattern refuses it too.
		return 0, fmt.Errorf("duration %q must not be negative", s)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q (use a number with a unit, such as \"500ms\" or \"1s\")", s)
	}
	if v < 0 {
		return 0, fmt.Errorf("duration %q must not be negative", s)
	}
	return v, nil
}

// RawJSON is a JSON value kept as its compact encoding, such as a fallback body.
// The zero value is absent.
type RawJSON []byte

// MarshalJSON returns the value itself, or null when absent. Bytes that are
// not valid JSON (which Validate reports) are written as a JSON string, so that
// marshalling a rule set never fails.
func (r RawJSON) MarshalJSON() ([]byte, error) {
	if len(r) == 0 {
		return []byte("null"), nil
	}
	if !json.Valid(r) {
		return json.Marshal(string(r))
	}
	return r, nil
}

// UnmarshalJSON keeps a compact copy of b.
func (r *RawJSON) UnmarshalJSON(b []byte) error {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return err
	}
	if buf.String() == "null" {
		*r = nil
		return nil
	}
	*r = buf.Bytes()
	return nil
}

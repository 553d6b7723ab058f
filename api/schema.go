package api

import _ "embed"

// Schema is the JSON Schema (draft 2020-12) of a rule document, for editors,
// the console and the admin API's documentation. It describes the same
// fields, types, enums, ranges and required fields as RuleSet and Validate
// (a test keeps them in step); Validate goes further, checking references
// between rules, uniqueness, regular expressions, CIDRs and cross-field rules,
// and stays the authority. Callers must not modify the slice.
//
//go:embed schema.json
var Schema []byte

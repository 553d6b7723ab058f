// Package classify is request classification over the request view
// (package reqview), shared by every rule that reads a request the same
// way: rule keys (Key, ParseKey, ParseLimitKey: which client a request is
// to a limit or a degrade plan, hashed with Hash, StableHash or written as
// Text), the key check that refuses a request whose keyed parts are
// ambiguous (KeyCheck, AmbiguousError), priority classes (Classes) and
// claims matches (ClaimMatch, as limit tiers and classes match verified
// claims).
//
// It imports nothing of the data plane but reqview and api, so that limit
// and degrade both read keys through it and degrade does not import limit.
// Everything here is compiled once per rule set and allocates nothing per
// request except where a method says so.
package classify

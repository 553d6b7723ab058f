// Package sluice is the control plane's domain: namespaces, draft rule sets,
// changes and reviews, immutable versions, publications, audit events, users,
// API tokens and nodes; the service interfaces over them; and the error codes
// every implementation returns. It imports only the standard library and the
// api module.
package sluice

package api

import "strings"

// DefaultEtcdPrefix is the root of every key Sluice writes to etcd.
const DefaultEtcdPrefix = "/sluice/v1"

// Keys builds etcd keys under a prefix. The zero value uses DefaultEtcdPrefix.
type Keys struct {
	Prefix string
}

func (k Keys) prefix() string {
	if k.Prefix == "" {
		return DefaultEtcdPrefix
	}
	return strings.TrimSuffix(k.Prefix, "/")
}

// Namespace is the prefix of every key of one namespace, with a trailing slash.
func (k Keys) Namespace(ns string) string { return k.prefix() + "/ns/" + ns + "/" }

// RuleSet is the key of a namespace's published rule set.
func (k Keys) RuleSet(ns string) string { return k.Namespace(ns) + "ruleset" }

// Canary is the key of a namespace's canary version and selector.
func (k Keys) Canary(ns string) string { return k.Namespace(ns) + "canary" }

// Nodes is the prefix of a namespace's node registrations.
func (k Keys) Nodes(ns string) string { return k.Namespace(ns) + "nodes/" }

// Node is one node's lease-bound registration key.
func (k Keys) Node(ns, nodeID string) string { return k.Nodes(ns) + nodeID }

// Overrides is the prefix of a namespace's per-node operator overrides.
func (k Keys) Overrides(ns string) string { return k.Namespace(ns) + "overrides/" }

// Override is one node's operator override key.
func (k Keys) Override(ns, nodeID string) string { return k.Overrides(ns) + nodeID }

package etcd

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluicegw/sluice/api"
	sluice "github.com/sluicegw/sluice/controlplane"
)

// AuditCheckpoint keeps the audit chain's head in etcd, at
// <prefix>/audit/head, as the JSON of sluice.AuditHead. Only sluice-admin
// should be allowed to write under <prefix>/audit/ (see docs/control-plane.md, "etcd TLS and auth").
// A write never moves the head back: it is a compare-and-swap on the key's
// revision that gives up when the stored head has a higher id, so replicas
// committing concurrently leave the newest head. Safe for concurrent use.
type AuditCheckpoint struct {
	Client *clientv3.Client
	Keys   api.Keys
}

var _ sluice.AuditCheckpoint = (*AuditCheckpoint)(nil)

// AuditHeadKey is the etcd key of the audit chain head under k's prefix.
func AuditHeadKey(k api.Keys) string {
	p := k.Prefix
	if p == "" {
		p = api.DefaultEtcdPrefix
	}
	return strings.TrimSuffix(p, "/") + "/audit/head"
}

// SaveAuditHead records h unless a head with a higher or equal id is there.
func (c *AuditCheckpoint) SaveAuditHead(ctx context.Context, h sluice.AuditHead) error {
	key := AuditHeadKey(c.Keys)
	val, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("encoding audit head: %w", err)
	}
	for range 10 {
		res, err := c.Client.Get(ctx, key)
		if err != nil {
			return fmt.Errorf("reading audit head: %w", err)
		}
		cmp := clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
		if len(res.Kvs) == 1 {
			var cur sluice.AuditHead
			// An unreadable value is overwritten: it vouches for nothing.
			if json.Unmarshal(res.Kvs[0].Value, &cur) == nil && cur.ID >= h.ID {
				return nil
			}
			cmp = clientv3.Compare(clientv3.ModRevision(key), "=", res.Kvs[0].ModRevision)
		}
		tr, err := c.Client.Txn(ctx).If(cmp).Then(clientv3.OpPut(key, string(val))).Commit()
		if err != nil {
			return fmt.Errorf("writing audit head: %w", err)
		}
		if tr.Succeeded {
			return nil
		}
	}
	return fmt.Errorf("writing audit head: the key kept changing")
}

// LoadAuditHead returns the recorded head, nil when there is none.
func (c *AuditCheckpoint) LoadAuditHead(ctx context.Context) (*sluice.AuditHead, error) {
	res, err := c.Client.Get(ctx, AuditHeadKey(c.Keys))
	if err != nil {
		return nil, fmt.Errorf("reading audit head: %w", err)
	}
	if len(res.Kvs) == 0 {
		return nil, nil
	}
	var h sluice.AuditHead
	if err := json.Unmarshal(res.Kvs[0].Value, &h); err != nil {
		return nil, fmt.Errorf("decoding audit head: %w", err)
	}
	return &h, nil
}

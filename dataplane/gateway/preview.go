package gateway

import (
	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/preview"
	"github.com/sluicegw/sluice/dataplane/registry"
)

// setPreview starts the preview p of rules v in place of the running one
// (nil p: stops it). A preview that does not compile is logged and the
// node runs none. Cluster limits are divided by nodes' count (nil: 1).
func (n *Node) setPreview(p *api.Preview, v *api.Valid, nodes *registry.Nodes) {
	var next *preview.Preview
	if p != nil {
		s := preview.Settings{MaxKeysPerLimit: n.cfg.Snapshot.MaxKeysPerLimit, Now: n.cfg.Snapshot.Now,
			EncodedSlashes: n.cfg.Snapshot.EncodedSlashes}
		if nodes != nil {
			s.Nodes = nodes.Count
		}
		var err error
		if next, err = preview.New(p, v, s); err != nil {
			n.log.Warn("preview refused: its rules do not compile", "change", p.Change, "err", err)
			next = nil
		}
	}
	if old := n.preview.Swap(next); old != nil {
		old.Close() // requests observing it finish on a closed set: it only stops its sweeper
	}
}

// PreviewReport is what the running preview counted, nil when none runs.
func (n *Node) PreviewReport() *api.PreviewReport {
	p := n.preview.Load()
	if p == nil {
		return nil
	}
	r := p.Report()
	return &r
}

package gateway

import (
	"context"

	"github.com/sluicegw/sluice/dataplane/internal/group"
)

// Component is a long-lived part of a node that runs beside serving: a rule
// source following its store, the registration, the override watch, the
// live-node count. Run should return nil once ctx ends; an error it returns
// before that (or a panic) stops the node.
type Component struct {
	// Name names the component in logs, errors and sluice_panics_total.
	Name string
	// Run runs the component until ctx ends.
	Run func(ctx context.Context) error
}

// Run serves on ls (see Serve) and runs every component, and the node's own
// statistics (RunStats), each in a goroutine of one group, until ctx ends or
// one of them fails. A component that returns an error or panics while the
// node serves stops the node at once: the panic is logged with its stack
// and counted in sluice_panics_total{component}, every other component is
// cancelled, in-flight requests drain, and Run returns that error (a
// *group.PanicError for a panic). The node does not restart a failed
// component: a panic may have left its state half-updated, and a supervisor
// restarting the process starts it from a known state (the rules file, or
// etcd and the state dir). Run returns once every goroutine it started has
// returned; nil after ctx ended and a clean drain.
func (n *Node) Run(ctx context.Context, ls *Listeners, components ...Component) error {
	g := group.New(group.Settings{Logger: n.log, OnPanic: func(name string) {
		n.metrics.Panics.WithLabelValues(name).Inc()
	}})
	g.Go(ctx, "serve", func(ctx context.Context) error { return n.Serve(ctx, ls) })
	g.Go(ctx, "stats", func(ctx context.Context) error { n.RunStats(ctx); return nil })
	for _, c := range components {
		g.Go(ctx, c.Name, c.Run)
	}
	return g.Wait()
}

//go:build !linux

package gateway

import (
	"context"
	"errors"
	"net"
)

// loopEngine is the event-loop engine, Linux-only (ParseEngine refuses it
// elsewhere).
type loopEngine struct{}

func (n *Node) startLoops(*dispatcher, net.Listener, int) (*loopEngine, error) {
	return nil, errors.New("event loops are built for Linux only")
}

func (e *loopEngine) drain(context.Context) error { return nil }

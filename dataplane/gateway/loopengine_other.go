//go:build !linux

package gateway

import (
	"context"
	"errors"
	"net"
)

// loopEngine is the HTTP/1.1 engine's event loops, built on epoll: the
// gateway serves traffic on Linux only (the SDK, dataplane/sdk, runs
// anywhere).
type loopEngine struct{}

func (n *Node) startLoops(*dispatcher, net.Listener, int) (*loopEngine, error) {
	return nil, errors.New("the gateway's HTTP/1.1 engine runs on Linux event loops (epoll) only: run sluice-gateway on Linux, or in a Linux container")
}

func (e *loopEngine) drain(context.Context) error { return nil }

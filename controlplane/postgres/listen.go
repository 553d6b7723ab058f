package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// Listen calls fn with the namespace of every publish notification (from any
// replica) until ctx ends, reconnecting with backoff when the connection
// breaks. It also calls fn("") after each (re)connection, since
// notifications sent while disconnected are lost.
func (db *DB) Listen(ctx context.Context, fn func(ns string)) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := db.listenOnce(ctx, fn, func() { backoff = 100 * time.Millisecond })
		if ctx.Err() != nil {
			return
		}
		db.settings.Logger.Debug("publish notifications: reconnecting", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 10*time.Second)
	}
}

func (db *DB) listenOnce(ctx context.Context, fn func(string), connected func()) error {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	conn, err := pgx.Connect(cctx, db.dsn)
	cancel()
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+NotifyChannel); err != nil {
		return err
	}
	connected()
	fn("")
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		fn(n.Payload)
	}
}

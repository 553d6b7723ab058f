package postgres_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	sluice "github.com/sluicegw/sluice/controlplane"
	"github.com/sluicegw/sluice/controlplane/internal/testenv"
	"github.com/sluicegw/sluice/controlplane/postgres"
)

// TestSessionSlides: a session used before its idle TTL runs out lives on,
// up to the absolute cap after sign-in; one left idle ends at the TTL.
func TestSessionSlides(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	var offset atomic.Int64
	now := func() time.Time { return t0.Add(time.Duration(offset.Load())) }
	at := func(d time.Duration) { offset.Store(int64(d)) }
	db := testenv.MustOpen(t, postgres.Settings{Now: now, SessionTTL: time.Hour, SessionMaxAge: 3 * time.Hour})
	ctx := context.Background()
	u := MustUser(t, postgres.NewUserService(db), "alice", sluice.RoleEditor)
	sessions := postgres.NewSessionService(db)
	_, active, err := sessions.CreateSession(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	_, idle, err := sessions.CreateSession(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		desc    string
		at      time.Duration
		secret  string
		live    bool
		expires time.Duration // after t0, when live
	}{
		{desc: "used after 50 min: extended to an hour from then", at: 50 * time.Minute, secret: active, live: true, expires: 110 * time.Minute},
		{desc: "used after 1 h 40 min, past the first hour", at: 100 * time.Minute, secret: active, live: true, expires: 160 * time.Minute},
		{desc: "used after 2 h 30 min: capped at 3 h after sign-in", at: 150 * time.Minute, secret: active, live: true, expires: 180 * time.Minute},
		{desc: "the idle one ended at its hour", at: 150 * time.Minute, secret: idle},
		{desc: "past the cap, however active", at: 181 * time.Minute, secret: active},
	} {
		at(tc.at)
		s, err := sessions.FindSession(ctx, tc.secret)
		if !tc.live {
			if sluice.ErrorCode(err) != sluice.EUNAUTHORIZED {
				t.Fatalf("%s: session %+v, err %v; want EUNAUTHORIZED", tc.desc, s, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.desc, err)
		}
		if want := t0.Add(tc.expires); !s.ExpiresAt.Equal(want) {
			t.Fatalf("%s: expires %s, want %s", tc.desc, s.ExpiresAt, want)
		}
	}
}

package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	sluice "github.com/sluicegw/sluice/controlplane"
)

type sessionRow struct {
	ID        string `gorm:"primaryKey"`
	UserID    int64
	CSRFToken string `gorm:"column:csrf_token"`
	CreatedAt time.Time
	ExpiresAt time.Time
}

func (sessionRow) TableName() string { return "sessions" }

// SessionService implements sluice.SessionService.
type SessionService struct{ db *DB }

var _ sluice.SessionService = (*SessionService)(nil)

// NewSessionService returns the session service of db.
func NewSessionService(db *DB) *SessionService { return &SessionService{db: db} }

// CreateSession starts a session for user; the secret goes in the cookie and
// only its sha256 is stored.
func (s *SessionService) CreateSession(ctx context.Context, user *sluice.User) (*sluice.Session, string, error) {
	secret, err := randomSecret("")
	if err != nil {
		return nil, "", err
	}
	csrf, err := randomSecret("")
	if err != nil {
		return nil, "", err
	}
	now := s.db.now()
	r := sessionRow{ID: sha256Hex(secret), UserID: user.ID, CSRFToken: csrf, CreatedAt: now, ExpiresAt: now.Add(s.db.settings.SessionTTL)}
	err = s.db.tx(ctx, func(tx *gorm.DB) error {
		// Expired sessions of anyone are swept here, a few at a time.
		if err := tx.Exec("DELETE FROM sessions WHERE id IN (SELECT id FROM sessions WHERE expires_at < ? LIMIT 100)", now).Error; err != nil {
			return err
		}
		return tx.Create(&r).Error
	})
	if err != nil {
		return nil, "", fmt.Errorf("creating session: %w", err)
	}
	return &sluice.Session{ID: r.ID, User: user, CSRFToken: csrf, CreatedAt: now, ExpiresAt: r.ExpiresAt}, secret, nil
}

// FindSession returns the live session of secret with its user.
func (s *SessionService) FindSession(ctx context.Context, secret string) (*sluice.Session, error) {
	var r sessionRow
	err := s.db.gorm.WithContext(ctx).Where("id = ?", sha256Hex(secret)).Take(&r).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, sluice.Errorf(sluice.EUNAUTHORIZED, "the session is unknown or has expired; log in again")
	}
	if err != nil {
		return nil, dbErr(fmt.Errorf("finding session: %w", err))
	}
	now := s.db.now()
	if !now.Before(r.ExpiresAt) {
		return nil, sluice.Errorf(sluice.EUNAUTHORIZED, "the session is unknown or has expired; log in again")
	}
	// Activity slides the end to SessionTTL from now, capped at
	// SessionMaxAge after sign-in; written at most once a minute per
	// session, so a busy console does not write on every request.
	if next := slide(now, r.CreatedAt, s.db.settings.SessionTTL, s.db.settings.SessionMaxAge); next.Sub(r.ExpiresAt) >= time.Minute {
		if err := s.db.gorm.WithContext(ctx).Exec("UPDATE sessions SET expires_at = ? WHERE id = ? AND expires_at < ?", next, r.ID, next).Error; err != nil {
			return nil, dbErr(fmt.Errorf("extending session: %w", err))
		}
		r.ExpiresAt = next
	}
	var u userRow
	if err := s.db.gorm.WithContext(ctx).Where("id = ?", r.UserID).Take(&u).Error; err != nil {
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return nil, sluice.Errorf(sluice.EUNAUTHORIZED, "the session is unknown or has expired; log in again")
		}
		return nil, dbErr(fmt.Errorf("finding session user: %w", err))
	}
	if u.Disabled {
		return nil, sluice.Errorf(sluice.EUNAUTHORIZED, "the user is disabled")
	}
	return &sluice.Session{ID: r.ID, User: u.user(), CSRFToken: r.CSRFToken, CreatedAt: r.CreatedAt.UTC(), ExpiresAt: r.ExpiresAt.UTC()}, nil
}

// slide is when a session signed in at created and used at now ends: ttl
// after now, but never later than maxAge after created.
func slide(now, created time.Time, ttl, maxAge time.Duration) time.Time {
	end := now.Add(ttl)
	if capAt := created.Add(maxAge); end.After(capAt) {
		return capAt
	}
	return end
}

// DeleteSession ends the session of secret.
func (s *SessionService) DeleteSession(ctx context.Context, secret string) error {
	if err := s.db.gorm.WithContext(ctx).Exec("DELETE FROM sessions WHERE id = ?", sha256Hex(secret)).Error; err != nil {
		return dbErr(fmt.Errorf("deleting session: %w", err))
	}
	return nil
}

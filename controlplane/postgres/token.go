package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"gorm.io/gorm"

	"github.com/sluicegw/sluice/api"
	sluice "github.com/sluicegw/sluice/controlplane"
)

type apiFieldError = api.FieldError

// TokenPrefix starts every API token secret, so that leaked tokens are easy
// to recognize and scan for.
const TokenPrefix = "slt_"

type tokenRow struct {
	ID         int64 `gorm:"primaryKey"`
	UserID     int64
	Name       string
	Role       string
	Hash       string
	CreatedAt  time.Time
	ExpiresAt  *time.Time
	RevokedAt  *time.Time
	LastUsedAt *time.Time
	Username   string `gorm:"->;-:migration"` // read from a join
	// The owner's, read from the join by Authenticate.
	UserRole     string    `gorm:"->;-:migration"`
	UserDisabled bool      `gorm:"->;-:migration"`
	UserCreated  time.Time `gorm:"->;-:migration"`
	UserUpdated  time.Time `gorm:"->;-:migration"`
}

func (tokenRow) TableName() string { return "api_tokens" }

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

func (r *tokenRow) token() *sluice.Token {
	return &sluice.Token{ID: r.ID, Name: r.Name, Role: sluice.Role(r.Role), UserID: r.UserID, Username: r.Username,
		CreatedAt: r.CreatedAt.UTC(), ExpiresAt: utcPtr(r.ExpiresAt), RevokedAt: utcPtr(r.RevokedAt), LastUsedAt: utcPtr(r.LastUsedAt)}
}

// TokenService implements sluice.TokenService.
type TokenService struct{ db *DB }

var _ sluice.TokenService = (*TokenService)(nil)

// NewTokenService returns the token service of db.
func NewTokenService(db *DB) *TokenService { return &TokenService{db: db} }

// CreateToken stores a token owned by the actor in ctx and returns its
// secret, which is not kept.
func (s *TokenService) CreateToken(ctx context.Context, t *sluice.Token) (string, error) {
	actor := sluice.ActorFromContext(ctx)
	if actor.User == nil {
		return "", sluice.Errorf(sluice.EUNAUTHORIZED, "log in first")
	}
	var fields []apiFieldError
	if n := utf8.RuneCountInString(strings.TrimSpace(t.Name)); n == 0 || n > 100 {
		fields = append(fields, apiFieldError{Path: "name", Message: "must be 1 to 100 characters"})
	}
	if !t.Role.Valid() {
		fields = append(fields, apiFieldError{Path: "role", Message: fmt.Sprintf("unknown role %q; one of viewer, editor, approver, admin", t.Role)})
	}
	now := s.db.now()
	if t.ExpiresAt != nil && !t.ExpiresAt.After(now) {
		fields = append(fields, apiFieldError{Path: "expiresAt", Message: "must be in the future"})
	}
	if len(fields) > 0 {
		return "", &sluice.Error{Code: sluice.EINVALID, Message: "invalid token", Fields: fields}
	}
	if !actor.Role.Allows(t.Role) {
		return "", sluice.Errorf(sluice.EFORBIDDEN, "a token's role cannot be above yours (%s)", actor.Role)
	}
	secret, err := randomSecret(TokenPrefix)
	if err != nil {
		return "", err
	}
	r := tokenRow{UserID: actor.User.ID, Name: strings.TrimSpace(t.Name), Role: string(t.Role), Hash: sha256Hex(secret), CreatedAt: now, ExpiresAt: t.ExpiresAt}
	err = s.db.tx(ctx, func(tx *gorm.DB) error {
		if err := tx.Omit("Username").Create(&r).Error; err != nil {
			return err
		}
		return s.db.appendAudit(ctx, tx, audit{Action: sluice.ActionTokenCreate, Object: "token/" + strconv.FormatInt(r.ID, 10),
			After: map[string]any{"id": r.ID, "name": r.Name, "role": r.Role, "expiresAt": r.ExpiresAt}})
	})
	if err != nil {
		return "", fmt.Errorf("creating token: %w", err)
	}
	r.Username = actor.User.Username
	*t = *r.token()
	return secret, nil
}

func (s *TokenService) query(ctx context.Context) *gorm.DB {
	return s.db.gorm.WithContext(ctx).Table("api_tokens").
		Select("api_tokens.*, users.username, users.role AS user_role, users.disabled AS user_disabled, users.created_at AS user_created, users.updated_at AS user_updated").Joins("JOIN users ON users.id = api_tokens.user_id")
}

// FindTokens lists tokens newest first; never their secrets.
func (s *TokenService) FindTokens(ctx context.Context, f sluice.TokenFilter) ([]*sluice.Token, error) {
	q := s.query(ctx)
	if f.UserID != 0 {
		q = q.Where("api_tokens.user_id = ?", f.UserID)
	}
	var rows []tokenRow
	if err := q.Order("api_tokens.id DESC").Find(&rows).Error; err != nil {
		return nil, dbErr(fmt.Errorf("listing tokens: %w", err))
	}
	out := make([]*sluice.Token, len(rows))
	for i := range rows {
		out[i] = rows[i].token()
	}
	return out, nil
}

// FindTokenByID returns ENOTFOUND when there is no such token.
func (s *TokenService) FindTokenByID(ctx context.Context, id int64) (*sluice.Token, error) {
	var rows []tokenRow
	if err := s.query(ctx).Where("api_tokens.id = ?", id).Find(&rows).Error; err != nil {
		return nil, dbErr(fmt.Errorf("finding token: %w", err))
	}
	if len(rows) == 0 {
		return nil, notFound("token %d not found", id)
	}
	return rows[0].token(), nil
}

// RevokeToken marks a token revoked; revoking it again changes nothing.
func (s *TokenService) RevokeToken(ctx context.Context, id int64) error {
	err := s.db.tx(ctx, func(tx *gorm.DB) error {
		var rows []tokenRow
		if err := tx.Raw("SELECT id, name, role, revoked_at FROM api_tokens WHERE id = ? FOR UPDATE", id).Scan(&rows).Error; err != nil {
			return err
		}
		if len(rows) == 0 {
			return notFound("token %d not found", id)
		}
		r := rows[0]
		if r.RevokedAt != nil {
			return nil
		}
		now := s.db.now()
		if err := tx.Exec("UPDATE api_tokens SET revoked_at = ? WHERE id = ?", now, id).Error; err != nil {
			return err
		}
		return s.db.appendAudit(ctx, tx, audit{Action: sluice.ActionTokenRevoke, Object: "token/" + strconv.FormatInt(id, 10),
			Before: map[string]any{"name": r.Name, "role": r.Role}, After: map[string]any{"revokedAt": now}})
	})
	if err != nil {
		return fmt.Errorf("revoking token: %w", err)
	}
	return nil
}

// Authenticate returns the token of secret and its owner.
func (s *TokenService) Authenticate(ctx context.Context, secret string) (*sluice.Token, *sluice.User, error) {
	unauthorized := sluice.Errorf(sluice.EUNAUTHORIZED, "the API token is unknown, revoked or expired")
	if !strings.HasPrefix(secret, TokenPrefix) || len(secret) > 200 {
		return nil, nil, unauthorized
	}
	var rows []tokenRow
	if err := s.query(ctx).Where("api_tokens.hash = ?", sha256Hex(secret)).Find(&rows).Error; err != nil {
		return nil, nil, dbErr(fmt.Errorf("finding token: %w", err))
	}
	now := s.db.now()
	if len(rows) == 0 || rows[0].RevokedAt != nil || (rows[0].ExpiresAt != nil && !now.Before(*rows[0].ExpiresAt)) {
		return nil, nil, unauthorized
	}
	r := &rows[0]
	t := r.token()
	u := &sluice.User{ID: r.UserID, Username: r.Username, Role: sluice.Role(r.UserRole), Disabled: r.UserDisabled,
		CreatedAt: r.UserCreated.UTC(), UpdatedAt: r.UserUpdated.UTC()}
	if u.Disabled {
		return nil, nil, unauthorized
	}
	// Record use at most once a minute per token.
	if r.LastUsedAt == nil || now.Sub(*r.LastUsedAt) > time.Minute {
		if err := s.db.gorm.WithContext(ctx).Exec("UPDATE api_tokens SET last_used_at = ? WHERE id = ? AND (last_used_at IS NULL OR last_used_at < ?)",
			now, t.ID, now.Add(-time.Minute)).Error; err != nil {
			return nil, nil, dbErr(fmt.Errorf("recording token use: %w", err))
		}
	}
	return t, u, nil
}

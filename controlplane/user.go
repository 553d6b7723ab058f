package sluice

import (
	"context"
	"time"
)

// Role is what a user or token may do. Each role may do everything the ones
// before it may.
type Role string

// The roles, from least to most trusted.
const (
	RoleViewer   Role = "viewer"   // read everything but users and tokens of others
	RoleEditor   Role = "editor"   // edit drafts, open changes, request rollbacks
	RoleApprover Role = "approver" // approve and reject changes of others, publish
	RoleAdmin    Role = "admin"    // manage users; emergency rollback
)

// Roles lists every role, least trusted first.
var Roles = []Role{RoleViewer, RoleEditor, RoleApprover, RoleAdmin}

// Valid reports whether r is one of Roles.
func (r Role) Valid() bool { return r.rank() > 0 }

func (r Role) rank() int {
	for i, x := range Roles {
		if x == r {
			return i + 1
		}
	}
	return 0
}

// Allows reports whether r is at least min. An invalid role allows nothing.
func (r Role) Allows(min Role) bool { return r.Valid() && r.rank() >= min.rank() }

// Lesser returns the less trusted of r and o.
func (r Role) Lesser(o Role) Role {
	if o.rank() < r.rank() {
		return o
	}
	return r
}

// User is a person (or a robot's owner) who signs in. PasswordHash is never
// serialized.
type User struct {
	ID           int64     `json:"id"`
	Username     string    `json:"username"`
	Role         Role      `json:"role"`
	Disabled     bool      `json:"disabled"`
	PasswordHash string    `json:"-"`
	CreatedAt    time.Time `json:"createdAt"`
	UpdatedAt    time.Time `json:"updatedAt"`
}

// UserUpdate holds the fields of a user to change; nil fields stay.
type UserUpdate struct {
	Role     *Role   `json:"role"`
	Password *string `json:"password"`
	Disabled *bool   `json:"disabled"`
}

// UserService manages users and checks passwords. Implementations are safe
// for concurrent use and audit every change.
type UserService interface {
	// FindUserByID returns ENOTFOUND when there is no such user.
	FindUserByID(ctx context.Context, id int64) (*User, error)
	// FindUsers returns every user, by id.
	FindUsers(ctx context.Context) ([]*User, error)
	// CreateUser stores u with password hashed. EINVALID for a bad name,
	// role or password; ECONFLICT when the name is taken, in any case.
	CreateUser(ctx context.Context, u *User, password string) error
	// UpdateUser applies upd. Disabling a user or changing their password
	// ends their sessions; a password change also revokes their API tokens.
	// ENOTFOUND, EINVALID; ECONFLICT when it would leave no enabled admin.
	UpdateUser(ctx context.Context, id int64, upd UserUpdate) (*User, error)
	// Authenticate checks a password and audits the attempt; the name
	// matches whatever its case. A wrong name or
	// password, or a disabled user, is EUNAUTHORIZED, with one message for all.
	Authenticate(ctx context.Context, username, password string) (*User, error)
	// EnsureBootstrapAdmin creates the admin user when there are no users at
	// all, and reports whether it did.
	EnsureBootstrapAdmin(ctx context.Context, username, password string) (bool, error)
}

// Session is a console login. Its secret (the cookie) is never stored.
type Session struct {
	ID        string    `json:"-"` // sha256 of the secret
	User      *User     `json:"user"`
	CSRFToken string    `json:"csrfToken"`
	CreatedAt time.Time `json:"createdAt"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// SessionService manages console sessions. Safe for concurrent use.
type SessionService interface {
	// CreateSession starts a session for user and returns it with the
	// secret to put in the cookie.
	CreateSession(ctx context.Context, user *User) (*Session, string, error)
	// FindSession returns the live session of a secret; EUNAUTHORIZED when it
	// is unknown, expired, or its user is disabled.
	FindSession(ctx context.Context, secret string) (*Session, error)
	// DeleteSession ends a session (logout); ending an unknown one is no error.
	DeleteSession(ctx context.Context, secret string) error
}

// Token is an API token for automation, bound to a role no higher than its
// owner's. The secret is shown once, at creation.
type Token struct {
	ID         int64      `json:"id"`
	Name       string     `json:"name"`
	Role       Role       `json:"role"`
	UserID     int64      `json:"userId"`
	Username   string     `json:"username"`
	CreatedAt  time.Time  `json:"createdAt"`
	ExpiresAt  *time.Time `json:"expiresAt,omitempty"`
	RevokedAt  *time.Time `json:"revokedAt,omitempty"`
	LastUsedAt *time.Time `json:"lastUsedAt,omitempty"`
}

// TokenFilter selects tokens. A zero UserID means every user's.
type TokenFilter struct {
	UserID int64
}

// TokenService manages API tokens. Safe for concurrent use; audits every
// change.
type TokenService interface {
	// CreateToken stores t for the actor in ctx and returns the secret.
	// EINVALID for a bad name, role or expiry; EFORBIDDEN for a role above
	// the actor's.
	CreateToken(ctx context.Context, t *Token) (string, error)
	// FindTokens lists tokens, newest first.
	FindTokens(ctx context.Context, f TokenFilter) ([]*Token, error)
	// FindTokenByID returns ENOTFOUND when there is no such token.
	FindTokenByID(ctx context.Context, id int64) (*Token, error)
	// RevokeToken revokes a token; ENOTFOUND when there is none.
	RevokeToken(ctx context.Context, id int64) error
	// Authenticate returns the token of a secret and its owner;
	// EUNAUTHORIZED when it is unknown, revoked, expired, or its owner is
	// disabled.
	Authenticate(ctx context.Context, secret string) (*Token, *User, error)
}

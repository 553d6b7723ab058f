package postgres

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/trustelem/zxcvbn"
	"golang.org/x/crypto/argon2"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	sluice "github.com/sluicegw/sluice/controlplane"
)

// Argon2Params is the cost of argon2id password hashing.
type Argon2Params struct {
	Time    uint32
	Memory  uint32 // KiB
	Threads uint8
}

// DefaultArgon2 follows the OWASP recommendation for argon2id (19 MiB, 2
// passes, 1 lane).
var DefaultArgon2 = Argon2Params{Time: 2, Memory: 19 * 1024, Threads: 1}

const minPasswordLength = 10

// HashPassword returns a PHC-format argon2id hash of password with a random
// salt.
func HashPassword(password string, p Argon2Params) (string, error) {
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("reading random salt: %w", err)
	}
	key := argon2.IDKey([]byte(password), salt, p.Time, p.Memory, p.Threads, 32)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, p.Memory, p.Time, p.Threads,
		base64.RawStdEncoding.EncodeToString(salt), base64.RawStdEncoding.EncodeToString(key)), nil
}

// CheckPassword reports whether password matches a hash from HashPassword,
// in constant time.
func CheckPassword(password, hash string) bool {
	parts := strings.Split(hash, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return false
	}
	var p Argon2Params
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &p.Memory, &p.Time, &p.Threads); err != nil {
		return false
	}
	salt, err1 := base64.RawStdEncoding.DecodeString(parts[4])
	want, err2 := base64.RawStdEncoding.DecodeString(parts[5])
	if err1 != nil || err2 != nil || len(want) == 0 {
		return false
	}
	got := argon2.IDKey([]byte(password), salt, p.Time, p.Memory, p.Threads, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1
}

var usernamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$`)

// minPasswordScore is the least zxcvbn score (0 to 4) a password needs: 3
// means about 10^8 guesses or more, "safely unguessable" in zxcvbn's terms
// for an online attack and moderate protection offline (the hash is
// argon2id).
const minPasswordScore = 3

// passwordInputs are words a password must not lean on, besides the user's
// name.
var passwordInputs = []string{"sluice", "sluicegw", "admin", "gateway", "ratelimit"}

// checkPassword enforces the password rule: 10 to 1024 characters and a
// zxcvbn score of at least minPasswordScore (github.com/trustelem/zxcvbn, a
// port of Dropbox's estimator with its common-password, name and word
// lists, keyboard patterns, repeats, sequences and dates), the user's own
// name counting as a known word. Only the first 128 characters are scored
// (the estimator is superlinear), so a long password is judged by its start.
func checkPassword(path, password string, inputs ...string) error {
	if n := utf8.RuneCountInString(password); n < minPasswordLength || len(password) > 1024 {
		return &sluice.Error{Code: sluice.EINVALID, Message: "invalid password",
			Fields: []apiFieldError{{Path: path, Message: fmt.Sprintf("must be %d to 1024 characters", minPasswordLength)}}}
	}
	scored := password
	if r := []rune(password); len(r) > 128 {
		scored = string(r[:128])
	}
	words := append(append([]string{}, passwordInputs...), inputs...)
	if res := zxcvbn.PasswordStrength(scored, words); res.Score < minPasswordScore {
		return &sluice.Error{Code: sluice.EINVALID, Message: "invalid password",
			Fields: []apiFieldError{{Path: path, Message: fmt.Sprintf(
				"is too easy to guess (strength %d of 4, at least %d needed; about 10^%d guesses): avoid common passwords, repeated or sequential characters, keyboard rows, dates and your name; a few unrelated words make a strong one", res.Score, minPasswordScore, int(math.Log10(max(res.Guesses, 1))))}}}
	}
	return nil
}

type userRow struct {
	ID           int64 `gorm:"primaryKey"`
	Username     string
	PasswordHash string
	Role         string
	Disabled     bool
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

func (userRow) TableName() string { return "users" }

func (r *userRow) user() *sluice.User {
	return &sluice.User{ID: r.ID, Username: r.Username, Role: sluice.Role(r.Role), Disabled: r.Disabled,
		PasswordHash: r.PasswordHash, CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC()}
}

// UserService implements sluice.UserService.
type UserService struct {
	db *DB
	// dummy is a hash checked against when the user does not exist, so that
	// a wrong name costs as much time as a wrong password.
	dummy string
}

var _ sluice.UserService = (*UserService)(nil)

// NewUserService returns the user service of db.
func NewUserService(db *DB) *UserService {
	dummy, _ := HashPassword("not a password", db.settings.Argon2)
	return &UserService{db: db, dummy: dummy}
}

// FindUserByID returns ENOTFOUND when there is no such user.
func (s *UserService) FindUserByID(ctx context.Context, id int64) (*sluice.User, error) {
	return s.db.findUser(ctx, id)
}

func (db *DB) findUser(ctx context.Context, id int64) (*sluice.User, error) {
	var r userRow
	err := db.gorm.WithContext(ctx).Where("id = ?", id).Take(&r).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, notFound("user %d not found", id)
	}
	if err != nil {
		return nil, dbErr(fmt.Errorf("finding user: %w", err))
	}
	return r.user(), nil
}

// FindUsers returns every user by id.
func (s *UserService) FindUsers(ctx context.Context) ([]*sluice.User, error) {
	var rows []userRow
	if err := s.db.gorm.WithContext(ctx).Order("id").Find(&rows).Error; err != nil {
		return nil, dbErr(fmt.Errorf("listing users: %w", err))
	}
	out := make([]*sluice.User, len(rows))
	for i := range rows {
		out[i] = rows[i].user()
	}
	return out, nil
}

func validUser(u *sluice.User) error {
	var fields []apiFieldError
	if !usernamePattern.MatchString(u.Username) {
		fields = append(fields, apiFieldError{Path: "username", Message: "must match [A-Za-z0-9][A-Za-z0-9._@-]{0,63}"})
	}
	if !u.Role.Valid() {
		fields = append(fields, apiFieldError{Path: "role", Message: fmt.Sprintf("unknown role %q; one of viewer, editor, approver, admin", u.Role)})
	}
	if len(fields) > 0 {
		return &sluice.Error{Code: sluice.EINVALID, Message: "invalid user", Fields: fields}
	}
	return nil
}

// CreateUser stores u with its password hashed; u.ID and timestamps are set.
func (s *UserService) CreateUser(ctx context.Context, u *sluice.User, password string) error {
	if err := validUser(u); err != nil {
		return err
	}
	if err := checkPassword("password", password, u.Username); err != nil {
		return err
	}
	hash, err := HashPassword(password, s.db.settings.Argon2)
	if err != nil {
		return err
	}
	now := s.db.now()
	r := userRow{Username: u.Username, PasswordHash: hash, Role: string(u.Role), Disabled: u.Disabled, CreatedAt: now, UpdatedAt: now}
	err = s.db.tx(ctx, func(tx *gorm.DB) error {
		// Names are unique regardless of case (the users_username_lower
		// index holds under concurrent creates; this names the other one).
		var taken []string
		if err := tx.Raw("SELECT username FROM users WHERE lower(username) = lower(?)", u.Username).Scan(&taken).Error; err != nil {
			return err
		}
		if len(taken) > 0 {
			return sluice.Errorf(sluice.ECONFLICT, "user %q already exists (as %q: user names ignore case)", u.Username, taken[0])
		}
		if err := tx.Create(&r).Error; err != nil {
			return err
		}
		return s.db.appendAudit(ctx, tx, audit{Action: sluice.ActionUserCreate, Object: "user/" + u.Username,
			After: map[string]any{"id": r.ID, "username": r.Username, "role": r.Role, "disabled": r.Disabled}})
	})
	if sluice.ErrorCode(err) == sluice.ECONFLICT && !strings.HasPrefix(sluice.ErrorMessage(err), "user ") {
		return sluice.Errorf(sluice.ECONFLICT, "user %q already exists (user names ignore case)", u.Username)
	}
	if err != nil {
		return fmt.Errorf("creating user: %w", err)
	}
	*u = *r.user()
	return nil
}

// UpdateUser changes a user's role, password or disabled flag.
func (s *UserService) UpdateUser(ctx context.Context, id int64, upd sluice.UserUpdate) (*sluice.User, error) {
	if upd.Role != nil && !upd.Role.Valid() {
		return nil, &sluice.Error{Code: sluice.EINVALID, Message: "invalid user",
			Fields: []apiFieldError{{Path: "role", Message: fmt.Sprintf("unknown role %q; one of viewer, editor, approver, admin", *upd.Role)}}}
	}
	var hash string
	if upd.Password != nil {
		if err := checkPassword("password", *upd.Password); err != nil {
			return nil, err
		}
		var err error
		if hash, err = HashPassword(*upd.Password, s.db.settings.Argon2); err != nil {
			return nil, err
		}
	}
	var out *sluice.User
	err := s.db.tx(ctx, func(tx *gorm.DB) error {
		var r userRow
		err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Where("id = ?", id).Take(&r).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return notFound("user %d not found", id)
		}
		if err != nil {
			return err
		}
		before := map[string]any{"role": r.Role, "disabled": r.Disabled}
		if upd.Role != nil {
			r.Role = string(*upd.Role)
		}
		if upd.Disabled != nil {
			r.Disabled = *upd.Disabled
		}
		if hash != "" {
			r.PasswordHash = hash
		}
		r.UpdatedAt = s.db.now()
		if r.Role != string(sluice.RoleAdmin) || r.Disabled {
			// Lock every admin row so two concurrent demotions cannot both
			// pass this check.
			var admins []int64
			if err := tx.Raw("SELECT id FROM users WHERE role = 'admin' AND NOT disabled AND id <> ? FOR UPDATE", id).Scan(&admins).Error; err != nil {
				return err
			}
			if len(admins) == 0 {
				return sluice.Errorf(sluice.ECONFLICT, "this would leave no enabled admin")
			}
		}
		if err := tx.Model(&userRow{}).Where("id = ?", id).Updates(map[string]any{
			"role": r.Role, "disabled": r.Disabled, "password_hash": r.PasswordHash, "updated_at": r.UpdatedAt}).Error; err != nil {
			return err
		}
		if r.Disabled || hash != "" {
			if err := tx.Exec("DELETE FROM sessions WHERE user_id = ?", id).Error; err != nil {
				return err
			}
		}
		after := map[string]any{"role": r.Role, "disabled": r.Disabled, "passwordChanged": hash != ""}
		if hash != "" {
			// A new password ends everything the old one opened, tokens
			// included: whoever learned the old one may have minted them.
			res := tx.Exec("UPDATE api_tokens SET revoked_at = ? WHERE user_id = ? AND revoked_at IS NULL", r.UpdatedAt, id)
			if res.Error != nil {
				return res.Error
			}
			after["tokensRevoked"] = res.RowsAffected
		}
		out = r.user()
		return s.db.appendAudit(ctx, tx, audit{Action: sluice.ActionUserUpdate, Object: "user/" + r.Username, Before: before,
			After: after})
	})
	if err != nil {
		return nil, fmt.Errorf("updating user: %w", err)
	}
	return out, nil
}

// Authenticate checks username and password and audits the attempt.
func (s *UserService) Authenticate(ctx context.Context, username, password string) (*sluice.User, error) {
	var rows []userRow
	if err := s.db.gorm.WithContext(ctx).Where("lower(username) = lower(?)", username).Limit(1).Find(&rows).Error; err != nil {
		return nil, dbErr(fmt.Errorf("finding user: %w", err))
	}
	ok := false
	if len(rows) == 1 {
		ok = CheckPassword(password, rows[0].PasswordHash) && !rows[0].Disabled
	} else {
		CheckPassword(password, s.dummy)
	}
	obj := "user/" + username
	if len(username) > 64 {
		obj = "user/" + username[:64]
	}
	if !ok {
		err := s.db.tx(ctx, func(tx *gorm.DB) error {
			return s.db.appendAudit(ctx, tx, audit{Action: sluice.ActionLoginFailed, Object: obj})
		})
		if err != nil {
			return nil, fmt.Errorf("auditing failed login: %w", err)
		}
		return nil, sluice.Errorf(sluice.EUNAUTHORIZED, "wrong username or password")
	}
	u := rows[0].user()
	actx := sluice.NewContextWithActor(ctx, withUser(sluice.ActorFromContext(ctx), u))
	if err := s.db.tx(actx, func(tx *gorm.DB) error {
		return s.db.appendAudit(actx, tx, audit{Action: sluice.ActionLogin, Object: obj})
	}); err != nil {
		return nil, fmt.Errorf("auditing login: %w", err)
	}
	return u, nil
}

func withUser(a sluice.Actor, u *sluice.User) sluice.Actor {
	a.User, a.Role = u, u.Role
	return a
}

// EnsureBootstrapAdmin creates an admin when the users table is empty. With
// several replicas starting at once, only one creates it.
func (s *UserService) EnsureBootstrapAdmin(ctx context.Context, username, password string) (bool, error) {
	if !usernamePattern.MatchString(username) {
		return false, sluice.Errorf(sluice.EINVALID, "invalid bootstrap admin name %q", username)
	}
	if err := checkPassword("bootstrap admin password", password, username); err != nil {
		return false, err
	}
	hash, err := HashPassword(password, s.db.settings.Argon2)
	if err != nil {
		return false, err
	}
	created := false
	ctx = sluice.NewContextWithActor(ctx, sluice.Actor{User: &sluice.User{Username: "system"}, Role: sluice.RoleAdmin})
	err = s.db.tx(ctx, func(tx *gorm.DB) error {
		// Serialize bootstrap across replicas on the audit lock.
		if err := tx.Exec("SELECT pg_advisory_xact_lock(?, 0)", auditLockClass).Error; err != nil {
			return err
		}
		var n int64
		if err := tx.Model(&userRow{}).Count(&n).Error; err != nil {
			return err
		}
		if n > 0 {
			return nil
		}
		now := s.db.now()
		r := userRow{Username: username, PasswordHash: hash, Role: string(sluice.RoleAdmin), CreatedAt: now, UpdatedAt: now}
		if err := tx.Create(&r).Error; err != nil {
			return err
		}
		created = true
		return s.db.appendAudit(ctx, tx, audit{Action: sluice.ActionUserCreate, Object: "user/" + username,
			After: map[string]any{"id": r.ID, "username": username, "role": "admin", "bootstrap": true}})
	})
	if err != nil {
		return false, fmt.Errorf("creating bootstrap admin: %w", err)
	}
	return created, nil
}

// randomSecret returns prefix and 32 random bytes in base64url.
func randomSecret(prefix string) (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("reading random bytes: %w", err)
	}
	return prefix + base64.RawURLEncoding.EncodeToString(b), nil
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// GeneratePassword returns a random password of 24 characters.
func GeneratePassword() (string, error) {
	b := make([]byte, 18)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("reading random bytes: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

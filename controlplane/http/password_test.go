package http_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	sluice "github.com/sluicegw/sluice/controlplane"
)

// TestPasswordRule: long enough is not enough. Common passwords, repeats,
// sequences, keyboard rows and the user's own name are refused with a 400
// naming the password and saying why; a passphrase of unrelated words is
// accepted. The rule holds on creation and on a password change.
func TestPasswordRule(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	admin := e.login("admin")
	for _, weak := range []string{"aaaaaaaaaaaa", "password1234", "Password1234!", "qwertyuiop12", "1234567890", "letmein12345", "iloveyou2024", "mallory12345"} {
		t.Run(weak, func(t *testing.T) {
			p := admin.must(http.StatusBadRequest, "POST", "/api/v1/users", map[string]any{"username": "mallory", "password": weak, "role": "viewer"}).problem(t)
			if p.Code != sluice.EINVALID || len(p.Errors) != 1 || p.Errors[0].Path != "password" || !strings.Contains(p.Errors[0].Message, "too easy to guess") {
				t.Fatalf("problem %+v", p)
			}
		})
	}
	var u sluice.User
	admin.must(http.StatusCreated, "POST", "/api/v1/users", map[string]any{"username": "mallory", "password": "tapir orbit kettle", "role": "viewer"}).decode(t, &u)
	p := admin.must(http.StatusBadRequest, "PATCH", "/api/v1/users/"+strconv.FormatInt(u.ID, 10), map[string]any{"password": "aaaaaaaaaaaa"}).problem(t)
	if len(p.Errors) != 1 || p.Errors[0].Path != "password" || !strings.Contains(p.Errors[0].Message, "too easy to guess") {
		t.Fatalf("weak password change: %+v", p)
	}
}

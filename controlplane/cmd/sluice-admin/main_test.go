package main

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadAuditKey: sluice-admin refuses to start without an audit key
// unless told to run insecurely, and refuses a short one.
func TestLoadAuditKey(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	short := filepath.Join(dir, "short")
	os.WriteFile(good, []byte(strings.Repeat("ab", 32)+"\n"), 0o600)
	os.WriteFile(short, []byte("tooshort"), 0o600)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tc := range []struct {
		desc    string
		cfg     Config
		env     string // SLUICE_AUDIT_KEY, "-" for unset
		wantKey bool
		wantErr string
	}{
		{desc: "file", cfg: Config{AuditKeyFile: good}, env: "-", wantKey: true},
		{desc: "environment", env: strings.Repeat("k", 40), wantKey: true},
		{desc: "short file", cfg: Config{AuditKeyFile: short}, env: "-", wantErr: "at least 32"},
		{desc: "missing file", cfg: Config{AuditKeyFile: filepath.Join(dir, "nope")}, env: "-", wantErr: "--audit-key-file"},
		{desc: "none", env: "-", wantErr: "no audit key"},
		{desc: "none, insecure", cfg: Config{InsecureNoAuditKey: true}, env: "-"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if tc.env == "-" {
				t.Setenv("SLUICE_AUDIT_KEY", "")
				os.Unsetenv("SLUICE_AUDIT_KEY")
			} else {
				t.Setenv("SLUICE_AUDIT_KEY", tc.env)
			}
			key, err := loadAuditKey(&tc.cfg, logger)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || (len(key) > 0) != tc.wantKey {
				t.Fatalf("key %q err %v", key, err)
			}
		})
	}
}

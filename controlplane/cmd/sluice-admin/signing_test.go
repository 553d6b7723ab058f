package main

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicegw/sluice/api"
)

func TestKeygen(t *testing.T) {
	dir := t.TempDir()
	priv, pub := filepath.Join(dir, "s.key"), filepath.Join(dir, "s.pub")
	var out strings.Builder
	if err := keygen([]string{"--private", priv, "--public", pub}, &out); err != nil {
		t.Fatal(err)
	}
	s, err := api.ReadSigner(priv)
	if err != nil {
		t.Fatal(err)
	}
	v, err := api.ReadVerifier(pub)
	if err != nil {
		t.Fatal(err)
	}
	if ids := v.KeyIDs(); len(ids) != 1 || ids[0] != s.KeyID() || !strings.Contains(out.String(), s.KeyID()) {
		t.Fatalf("key ids %v, signer %s, output %q", ids, s.KeyID(), out.String())
	}
	if fi, err := os.Stat(priv); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("private key mode %v, %v", fi.Mode(), err)
	}
	for _, tc := range []struct {
		desc string
		args []string
		want string // error substring; "" means success
	}{
		{"never overwrites a key", []string{"--private", priv, "--public", pub}, "file exists"},
		{"if missing: nothing to do", []string{"--if-missing", "--private", priv, "--public", pub}, ""},
		{"both files are required", []string{"--private", priv}, "usage"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			err := keygen(tc.args, io.Discard)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("keygen: %v, want %q", err, tc.want)
			}
		})
	}
	if s2, err := api.ReadSigner(priv); err != nil || s2.KeyID() != s.KeyID() {
		t.Fatal("the key changed")
	}
}

func TestSigningFlags(t *testing.T) {
	dir := t.TempDir()
	var keys []string
	for _, n := range []string{"new", "old"} {
		p := filepath.Join(dir, n+".key")
		if err := keygen([]string{"--private", p, "--public", p + ".pub"}, io.Discard); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, p)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	newOnly, _ := api.ReadSigner(keys[0])
	for _, tc := range []struct {
		desc string
		args []string
		env  string // SLUICE_SIGNING_KEY_FILE
		ids  int    // keys loaded; 0: no signer
		want string // error substring
	}{
		{"no key", nil, "", 0, "no --signing-key"},
		{"no key, insecure", []string{"--insecure-publish-unsigned"}, "", 0, ""},
		{"repeated flag", []string{"--signing-key", keys[0], "--signing-key", keys[1]}, "", 2, ""},
		{"comma list", []string{"--signing-key", keys[0] + "," + keys[1]}, "", 2, ""},
		{"environment", nil, keys[0] + "," + keys[1], 2, ""},
		{"a public key", []string{"--signing-key", keys[0] + ".pub"}, "", 0, "PRIVATE KEY"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Setenv("SLUICE_SIGNING_KEY_FILE", tc.env)
			cfg, err := parseFlags("serve", tc.args)
			if err != nil {
				t.Fatal(err)
			}
			s, err := loadSigner(cfg, logger)
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("loadSigner: %v, want %q", err, tc.want)
				}
				return
			}
			if err != nil || (s == nil) != (tc.ids == 0) || (s != nil && (len(s.KeyIDs()) != tc.ids || s.KeyID() != newOnly.KeyID())) {
				t.Fatalf("loadSigner: %v %v", s, err)
			}
		})
	}
}

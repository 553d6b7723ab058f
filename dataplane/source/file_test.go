package source

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/api"
)

func startWatch(t *testing.T, f *File) <-chan Update {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan Update, 16)
	done := make(chan error, 1)
	go func() {
		done <- f.Watch(ctx, func(_ context.Context, u Update) error { got <- u; return nil })
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Watch returned %v", err)
		}
	})
	return got
}

func next(t *testing.T, ch <-chan Update) Update {
	t.Helper()
	select {
	case u := <-ch:
		return u
	case <-time.After(5 * time.Second):
		t.Fatal("no update within 5s")
		return Update{}
	}
}

func TestFileWatch(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(path, []byte("namespace: a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := &File{Path: path, Debounce: 10 * time.Millisecond}
	first, err := f.Load()
	if err != nil || string(first.Data) != "namespace: a\n" || first.Version != 1 || first.Source != "file:"+path {
		t.Fatalf("Load = %+v, %v", first, err)
	}
	got := startWatch(t, f)
	time.Sleep(50 * time.Millisecond) // let the watcher register before writing

	// A plain write.
	if err := os.WriteFile(path, []byte("namespace: b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if u := next(t, got); string(u.Data) != "namespace: b\n" || u.Version != 2 {
		t.Fatalf("after write: %+v", u)
	}
	// An atomic rename over the file, as editors and ConfigMaps do.
	tmp := filepath.Join(dir, ".rules.tmp")
	if err := os.WriteFile(tmp, []byte("namespace: c\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	if u := next(t, got); string(u.Data) != "namespace: c\n" || u.Version != 3 {
		t.Fatalf("after rename: %+v", u)
	}
	// Reload re-reads unchanged content.
	f.Reload()
	if u := next(t, got); string(u.Data) != "namespace: c\n" || u.Version != 4 {
		t.Fatalf("after Reload: %+v", u)
	}
	// Writing another file in the directory is ignored; the file vanishing is reported.
	if err := os.WriteFile(filepath.Join(dir, "other"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if u := next(t, got); u.Err == nil || !errors.Is(u.Err, os.ErrNotExist) {
		t.Fatalf("after remove: %+v", u)
	}
}

func TestFileTooLarge(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(path, []byte(strings.Repeat("#", api.MaxDocumentBytes+1)), 0o644); err != nil {
		t.Fatal(err)
	}
	f := &File{Path: path}
	if _, err := f.Load(); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Load of an oversized file = %v, want ErrTooLarge", err)
	}
	if _, err := (&File{Path: filepath.Join(t.TempDir(), "missing")}).Load(); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Load of a missing file = %v", err)
	}
}

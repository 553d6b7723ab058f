package source

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/sluicegw/sluice/api"
)

// File reads rules from one file and watches it: a write, a create or an
// atomic rename over the file (as editors and Kubernetes ConfigMaps do) causes
// a reload after Debounce, and so does Reload (which the gateway calls on
// SIGHUP). The zero value is not usable: set Path.
type File struct {
	// Path is the rules file.
	Path string
	// Debounce is how long to wait after a change event before reading, so a
	// burst of writes is read once. Zero means 100ms.
	Debounce time.Duration
	// Logger receives watch errors; nil means slog.Default().
	Logger *slog.Logger

	reload  chan struct{}
	once    sync.Once
	lastSum [32]byte
	version int64
}

func (f *File) init() {
	f.once.Do(func() { f.reload = make(chan struct{}, 1) })
}

// Name is the Update.Source of this file's documents.
func (f *File) Name() string { return "file:" + f.Path }

// Load reads the file once. It is what the gateway calls at start: an error
// there stops the start.
func (f *File) Load() (Update, error) {
	data, err := readLimited(f.Path)
	if err != nil {
		return Update{}, err
	}
	f.version++
	f.lastSum = sumOf(data)
	return Update{Data: data, Version: f.version, Source: f.Name(), ReadAt: time.Now()}, nil
}

// Reload asks a running Watch to read the file again now, even if it has not
// changed on disk (a refused document can so be retried). Safe for
// concurrent use; never blocks.
func (f *File) Reload() {
	f.init()
	select {
	case f.reload <- struct{}{}:
	default:
	}
}

// Watch follows the file until ctx ends, calling apply with every new
// document: one whose content differs from the last one read, or any on
// Reload. It returns nil when ctx ends, or an error when the watch cannot be
// set up.
func (f *File) Watch(ctx context.Context, apply Apply) error {
	f.init()
	log := f.Logger
	if log == nil {
		log = slog.Default()
	}
	debounce := f.Debounce
	if debounce <= 0 {
		debounce = 100 * time.Millisecond
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watching %s: %w", f.Path, err)
	}
	defer w.Close()
	// Watch the directory: an editor's or ConfigMap's rename replaces the
	// file's inode, and a watch on the file itself would be lost.
	dir := filepath.Dir(f.Path)
	if err := w.Add(dir); err != nil {
		return fmt.Errorf("watching %s: %w", dir, err)
	}
	base := filepath.Base(f.Path)
	var timer *time.Timer
	var fire <-chan time.Time
	read := func(force bool) {
		data, err := readLimited(f.Path)
		if err != nil {
			_ = apply(ctx, Update{Source: f.Name(), ReadAt: time.Now(), Err: err})
			return
		}
		sum := sumOf(data)
		if !force && sum == f.lastSum {
			return
		}
		f.lastSum = sum
		f.version++
		_ = apply(ctx, Update{Data: data, Version: f.version, Source: f.Name(), ReadAt: time.Now()})
	}
	for {
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return nil
		case <-f.reload:
			read(true)
		case ev, ok := <-w.Events:
			if !ok {
				return errors.New("file watcher closed")
			}
			if filepath.Base(ev.Name) != base && !isConfigMapSwap(ev.Name, dir) {
				continue
			}
			if timer == nil {
				timer = time.NewTimer(debounce)
			} else {
				timer.Reset(debounce)
			}
			fire = timer.C
		case <-fire:
			fire = nil
			read(false)
		case err, ok := <-w.Errors:
			if !ok {
				return errors.New("file watcher closed")
			}
			log.Warn("rules file watch error", "path", f.Path, "err", err)
		}
	}
}

// isConfigMapSwap recognises the "..data" symlink swap Kubernetes uses to
// update mounted ConfigMaps.
func isConfigMapSwap(name, dir string) bool {
	return filepath.Dir(name) == dir && filepath.Base(name) == "..data"
}

// ErrTooLarge is returned for a rules file over api.MaxDocumentBytes.
var ErrTooLarge = fmt.Errorf("rules file is larger than %d bytes", api.MaxDocumentBytes)

func readLimited(path string) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening rules file: %w", err)
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, api.MaxDocumentBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading rules file: %w", err)
	}
	if len(data) > api.MaxDocumentBytes {
		return nil, ErrTooLarge
	}
	return data, nil
}

func sumOf(b []byte) [32]byte { return sha256.Sum256(b) }

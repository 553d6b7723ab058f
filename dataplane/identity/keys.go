package identity

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/sluicegw/sluice/api"
)

// MaxJWKSBytes bounds a JWKS document (file or URL): another machine's word
// is size-capped before it is parsed.
const MaxJWKSBytes = 1 << 20

// MaxJWKSKeys bounds the keys kept from one JWKS.
const MaxJWKSKeys = 64

// keySet is one loaded JWKS: its usable public signing keys, and its
// generation (incremented by every load that changes it), which negative
// cache entries are checked against.
type keySet struct {
	keys []jose.JSONWebKey
	gen  uint64
}

// find returns the keys a token signed with alg under kid may be verified
// with: the keys with that kid (or every key, for a token without kid)
// whose type fits alg and whose own alg, when set, is alg.
func (s *keySet) find(kid string, alg string, dst []jose.JSONWebKey) []jose.JSONWebKey {
	for _, k := range s.keys {
		if kid != "" && k.KeyID != kid {
			continue
		}
		if k.Algorithm != "" && k.Algorithm != alg {
			continue
		}
		if !keyFits(k, alg) {
			continue
		}
		dst = append(dst, k)
	}
	return dst
}

// keyFits reports whether k's key type is the one alg signs with.
func keyFits(k jose.JSONWebKey, alg string) bool {
	switch k.Key.(type) {
	case *rsaPublicKey:
		return alg[0] == 'R' || alg[0] == 'P'
	case *ecdsaPublicKey:
		return alg[0] == 'E' && alg != "EdDSA"
	case edPublicKey:
		return alg == "EdDSA"
	}
	return false
}

// KeySettings are how a KeySource reads its JWKS. The zero value reads
// nothing; Source is required.
type KeySettings struct {
	Source api.JWKSSource
	// Client fetches URLs; nil means a client with a 5s timeout.
	Client *http.Client
	// FilePoll is how often a file's modification time and size are
	// checked; 0 means one second.
	FilePoll time.Duration
	// Logger receives load failures; nil means slog.Default.
	Logger *slog.Logger
	// Now is the loader's clock; nil means time.Now.
	Now func() time.Time
}

// KeySource holds an identity's JWKS and keeps it current off the request
// path: one goroutine (started by Start, stopped by Close) reads the file
// again when it changes, or fetches the URL every Refresh and, when a token
// names a kid the set lacks (Refetch), at most once per Refresh/10. A load
// that fails (unreachable, not 200, too large, no usable key) keeps the
// keys already loaded. Safe for concurrent use.
type KeySource struct {
	set      atomic.Pointer[keySet]
	settings KeySettings
	refetch  chan struct{}
	loads    atomic.Int64 // successful loads
	failures atomic.Int64
	lastErr  atomic.Pointer[string]

	stop context.CancelFunc
	wg   sync.WaitGroup

	// The loader's own state, under loadMu (Load may also be called by
	// others than the loader).
	loadMu    sync.Mutex
	fileStamp string
	lastFetch time.Time
}

// NewKeySource returns a KeySource for s, with no keys until Load or Start.
func NewKeySource(s KeySettings) *KeySource {
	if s.Client == nil {
		s.Client = &http.Client{Timeout: 5 * time.Second}
	}
	if s.FilePoll == 0 {
		s.FilePoll = time.Second
	}
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	if s.Now == nil {
		s.Now = time.Now
	}
	k := &KeySource{settings: s, refetch: make(chan struct{}, 1)}
	k.set.Store(&keySet{})
	return k
}

// Start loads the keys once (waiting up to wait for it) and starts the
// goroutine that keeps them current, until ctx is done or Close.
func (k *KeySource) Start(ctx context.Context, wait time.Duration) {
	ctx, k.stop = context.WithCancel(ctx)
	first := make(chan struct{})
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		defer func() {
			if r := recover(); r != nil {
				k.settings.Logger.Error("jwks loader panicked", "panic", r)
			}
		}()
		k.Load(ctx)
		close(first)
		k.run(ctx)
	}()
	select {
	case <-first:
	case <-time.After(wait):
	}
}

// Close stops the loader and waits for it.
func (k *KeySource) Close() {
	if k.stop != nil {
		k.stop()
	}
	k.wg.Wait()
}

func (k *KeySource) run(ctx context.Context) {
	src := k.settings.Source
	every := k.settings.FilePoll
	if src.URL != "" {
		every = src.RefreshEvery()
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			k.Load(ctx)
		case <-k.refetch:
			k.loadMu.Lock()
			due := src.URL != "" && k.settings.Now().Sub(k.lastFetch) >= src.RefreshEvery()/10
			k.loadMu.Unlock()
			if due {
				k.Load(ctx)
			}
		}
	}
}

// Refetch asks the loader to fetch the URL again (a token named a kid the
// set lacks); it never blocks, and the loader fetches at most once per
// Refresh/10. For a file it does nothing: the file is watched.
func (k *KeySource) Refetch() {
	select {
	case k.refetch <- struct{}{}:
	default:
	}
}

// Load reads the JWKS once, now; on failure the keys already loaded stay.
// The loader calls it; others may too (loads are serialized).
func (k *KeySource) Load(ctx context.Context) error {
	k.loadMu.Lock()
	defer k.loadMu.Unlock()
	data, err := k.read(ctx)
	if err == nil && data == nil {
		return nil // a file that did not change
	}
	if err == nil {
		var keys []jose.JSONWebKey
		keys, err = ParseJWKS(data)
		if err == nil {
			old := k.set.Load()
			k.set.Store(&keySet{keys: keys, gen: old.gen + 1})
			k.loads.Add(1)
			k.lastErr.Store(nil)
			return nil
		}
	}
	k.failures.Add(1)
	msg := err.Error()
	k.lastErr.Store(&msg)
	k.settings.Logger.Warn("jwks load failed; keeping the keys loaded before", "source", k.describe(), "err", err)
	return err
}

func (k *KeySource) describe() string {
	if k.settings.Source.File != "" {
		return k.settings.Source.File
	}
	return api.RedactURL(k.settings.Source.URL)
}

// read returns the JWKS document, or nil (and no error) for a file that has
// not changed since the last read.
func (k *KeySource) read(ctx context.Context) ([]byte, error) {
	src := k.settings.Source
	if src.File != "" {
		fi, err := os.Stat(src.File)
		if err != nil {
			return nil, err
		}
		stamp := fmt.Sprintf("%d/%d", fi.ModTime().UnixNano(), fi.Size())
		if stamp == k.fileStamp {
			return nil, nil
		}
		if fi.Size() > MaxJWKSBytes {
			return nil, fmt.Errorf("%s is %d bytes; the limit is %d", src.File, fi.Size(), MaxJWKSBytes)
		}
		data, err := os.ReadFile(src.File)
		if err == nil {
			k.fileStamp = stamp
		}
		return data, err
	}
	k.lastFetch = k.settings.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, src.URL, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := k.settings.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d", resp.StatusCode)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxJWKSBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxJWKSBytes {
		return nil, fmt.Errorf("JWKS is over %d bytes", MaxJWKSBytes)
	}
	return data, nil
}

// ParseJWKS returns the public signing keys of a JWKS document: keys that
// do not parse, symmetric keys, and keys marked for encryption are
// skipped; private keys are kept as their public halves. It fails when the
// document is not a JWKS or holds no usable key.
func ParseJWKS(data []byte) ([]jose.JSONWebKey, error) {
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("not a JWKS: %w", err)
	}
	var keys []jose.JSONWebKey
	for _, raw := range doc.Keys {
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(raw); err != nil || !k.Valid() {
			continue
		}
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		if !k.IsPublic() {
			k = k.Public()
		}
		if !keyFits(k, "RS256") && !keyFits(k, "ES256") && !keyFits(k, "EdDSA") {
			continue // symmetric or unknown
		}
		keys = append(keys, k)
		if len(keys) == MaxJWKSKeys {
			break
		}
	}
	if len(keys) == 0 {
		return nil, errors.New("the JWKS holds no usable public signing key")
	}
	return keys, nil
}

// Status is what /status shows of a KeySource.
type Status struct {
	Keys     int    `json:"keys"`
	Loads    int64  `json:"loads"`
	Failures int64  `json:"failures"`
	LastErr  string `json:"lastError,omitempty"`
}

// Status returns the source's counters and last error.
func (k *KeySource) Status() Status {
	s := Status{Keys: len(k.set.Load().keys), Loads: k.loads.Load(), Failures: k.failures.Load()}
	if e := k.lastErr.Load(); e != nil {
		s.LastErr = *e
	}
	return s
}

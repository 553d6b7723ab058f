// Package tlsreload serves a TLS certificate from a PEM certificate and key
// file pair and reloads it when the files change, without touching the
// connections already open: a handshake takes whichever pair is current
// (tls.Config.GetCertificate), and an established connection keeps the one
// it shook hands with.
//
// A Reloader polls the two files (os.Stat, which follows symbolic links, so
// a Kubernetes Secret volume's atomic ..data swap is seen like an in-place
// rewrite) and reloads when either one's modification time, size or inode
// changes. A new pair that does not load (unreadable, not PEM, a key that
// does not match the certificate, expired) is refused: the old pair goes on
// serving, the error is logged and reported to OnReload, and the files are
// tried again when they change again. A pair written in two steps (the
// certificate, then the key) therefore fails once, harmlessly, and loads on
// the next poll.
//
// With Settings.Staple it also staples OCSP responses (ocsp.go): the
// leaf's responder is asked from the node, off the handshake path.
package tlsreload

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// DefaultInterval is how often the files are checked when
// Settings.Interval is zero.
const DefaultInterval = time.Second

// Settings configure a Reloader. CertFile and KeyFile are required; every
// other zero field takes the default named beside it.
type Settings struct {
	// CertFile is the PEM certificate chain, leaf first.
	CertFile string
	// KeyFile is the PEM private key of the leaf.
	KeyFile string
	// Interval is the poll period; default DefaultInterval.
	Interval time.Duration
	// Logger receives one line per reload and per refused pair; nil means
	// slog.Default(). Key material is never logged.
	Logger *slog.Logger
	// OnReload, when set, is called after every attempt to load a changed
	// pair: with nil and the new leaf on success, with the error (and the
	// leaf still served) on failure. For metrics.
	OnReload func(err error, leaf *x509.Certificate)
	// Now returns the time certificates are checked against (expiry);
	// nil means time.Now.
	Now func() time.Time

	// Staple turns on OCSP stapling (see ocsp.go): the certificate file
	// must hold the issuer after the leaf, and the leaf name a responder.
	Staple bool
	// StapleRetry is how soon a failed OCSP request is tried again;
	// default DefaultStapleRetry.
	StapleRetry time.Duration
	// StapleTimeout bounds one OCSP request; default DefaultStapleTimeout.
	StapleTimeout time.Duration
	// StapleClient sends OCSP requests; nil means a client of its own
	// (the environment's proxy settings apply).
	StapleClient *http.Client
	// OnStaple, when set, is called after each OCSP request: with nil and
	// the new staple's NextUpdate on success, with the error and the
	// NextUpdate of the staple still served (zero: none) on failure.
	OnStaple func(err error, until time.Time)
}

// Reloader holds the current certificate of a file pair. Create it with
// New; it is safe for concurrent use. Run polls the files; without Run the
// first pair is served for good (Check reloads by hand).
type Reloader struct {
	s    Settings
	cert atomic.Pointer[tls.Certificate]

	mu   sync.Mutex // serialises Check; guards st and offLogged
	seen [2]fileStamp

	st        stapleState      // OCSP stapling of the current pair (Settings.Staple)
	offLogged *tls.Certificate // the pair "stapling off" was logged for
}

// fileStamp is what a change is judged by.
type fileStamp struct {
	mod  time.Time
	size int64
	ino  uint64
	dev  uint64
}

// New loads the pair once and returns a Reloader serving it. It fails, with
// an error naming the file or the mismatch, when the pair does not load.
func New(s Settings) (*Reloader, error) {
	if s.CertFile == "" || s.KeyFile == "" {
		return nil, errors.New("tls: give both a certificate file and a key file")
	}
	if s.Interval <= 0 {
		s.Interval = DefaultInterval
	}
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	if s.Now == nil {
		s.Now = time.Now
	}
	if s.StapleRetry <= 0 {
		s.StapleRetry = DefaultStapleRetry
	}
	if s.StapleTimeout <= 0 {
		s.StapleTimeout = DefaultStapleTimeout
	}
	if s.StapleClient == nil {
		s.StapleClient = &http.Client{Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, ForceAttemptHTTP2: true}}
	}
	r := &Reloader{s: s}
	stamps, err := r.stamps()
	if err != nil {
		return nil, err
	}
	c, err := r.load()
	if err != nil {
		return nil, err
	}
	r.seen = stamps
	r.cert.Store(c)
	r.st = newStapleState(c)
	return r, nil
}

// stamps stats both files.
func (r *Reloader) stamps() ([2]fileStamp, error) {
	var out [2]fileStamp
	for i, name := range []string{r.s.CertFile, r.s.KeyFile} {
		fi, err := os.Stat(name)
		if err != nil {
			return out, fmt.Errorf("tls: %w", err)
		}
		out[i] = fileStamp{mod: fi.ModTime(), size: fi.Size()}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			out[i].ino, out[i].dev = uint64(st.Ino), uint64(st.Dev) //nolint:unconvert // widths differ by platform
		}
	}
	return out, nil
}

// load reads and checks the pair: it parses, the key matches, and the leaf
// is within its validity period.
func (r *Reloader) load() (*tls.Certificate, error) {
	c, err := tls.LoadX509KeyPair(r.s.CertFile, r.s.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("tls: loading %s and %s: %w", r.s.CertFile, r.s.KeyFile, err)
	}
	now := r.s.Now()
	if now.After(c.Leaf.NotAfter) {
		return nil, fmt.Errorf("tls: certificate %s expired at %s", r.s.CertFile, c.Leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	if now.Before(c.Leaf.NotBefore) {
		return nil, fmt.Errorf("tls: certificate %s is not valid before %s", r.s.CertFile, c.Leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	return &c, nil
}

// Check reloads the pair if either file changed since the last attempt. It
// returns nil when nothing changed or the new pair was loaded, and the
// reason otherwise, the old pair still being served. A file that cannot be
// stat'ed (being replaced) is an error and is tried again next time.
func (r *Reloader) Check() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	stamps, err := r.stamps()
	if err != nil {
		r.s.Logger.Warn("tls certificate files unreadable; serving the previous certificate", "err", err)
		return err
	}
	if stamps == r.seen {
		return nil
	}
	r.seen = stamps // tried once per change, whatever the outcome
	c, err := r.load()
	if err != nil {
		old := r.cert.Load().Leaf
		r.s.Logger.Error("tls certificate reload refused; serving the previous certificate",
			"err", err, "serving_not_after", old.NotAfter)
		if r.s.OnReload != nil {
			r.s.OnReload(err, old)
		}
		return err
	}
	r.cert.Store(c)
	r.st = newStapleState(c) // the old staple is for the old leaf; ask at once
	r.s.Logger.Info("tls certificate reloaded", "cert", r.s.CertFile, "subject", c.Leaf.Subject.String(),
		"not_after", c.Leaf.NotAfter)
	if r.s.OnReload != nil {
		r.s.OnReload(nil, c.Leaf)
	}
	return nil
}

// Run checks the files every Interval until ctx ends, then returns nil.
// With Settings.Staple it also keeps the OCSP staple fresh, from the same
// loop (a hung responder delays a file check by StapleTimeout at most).
func (r *Reloader) Run(ctx context.Context) error {
	t := time.NewTicker(r.s.Interval)
	defer t.Stop()
	if r.s.Staple {
		r.staple(ctx, r.s.Now())
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			_ = r.Check() // logged and reported by Check
			if r.s.Staple {
				r.staple(ctx, r.s.Now())
			}
		}
	}
}

// Certificate returns the pair currently served.
func (r *Reloader) Certificate() *tls.Certificate { return r.cert.Load() }

// GetCertificate is a tls.Config.GetCertificate returning the current pair
// whatever the client hello asks for.
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.cert.Load(), nil
}

// CipherSuites are the TLS 1.2 suites ServerConfig allows: ECDHE key
// exchange with AEAD ciphers only (Mozilla's "intermediate" list). TLS 1.3
// suites are all modern and not configurable.
var CipherSuites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// ServerConfig returns a server configuration serving r's current pair:
// TLS 1.2 or later, CipherSuites for TLS 1.2, and ALPN h2 then http/1.1.
// Each call returns a new Config; all of them follow r's reloads.
func (r *Reloader) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		CipherSuites:   CipherSuites,
		NextProtos:     []string{"h2", "http/1.1"},
		GetCertificate: r.GetCertificate,
	}
}

package tlsreload

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"golang.org/x/crypto/ocsp"
)

// OCSP stapling (Settings.Staple): the Reloader asks the responder named in
// the leaf (its Authority Information Access OCSP URL) for the leaf's
// status, checks the answer is signed for this leaf by its issuer (the
// second certificate of the chain file) and says "good", and staples it to
// every handshake (tls.Certificate.OCSPStaple) until it is due for renewal.
//
// It asks again halfway through the response's validity (ThisUpdate to
// NextUpdate), after RetryInterval when an attempt fails, and at once when
// the certificate files change (a staple belongs to one leaf). A failed
// attempt keeps the current staple while it is valid; a staple past its
// NextUpdate is dropped, and the pair is then served without one, as it is
// when the leaf names no responder or the chain holds no issuer (both
// logged once per pair). Serving never waits for the responder.

// Staple defaults.
const (
	// DefaultStapleRetry is how soon a failed OCSP request is tried again.
	DefaultStapleRetry = time.Minute
	// DefaultStapleTimeout bounds one OCSP request.
	DefaultStapleTimeout = 10 * time.Second
	// maxOCSPResponse bounds the responder's answer read.
	maxOCSPResponse = 1 << 20
	// defaultStapleLife is how long a response without NextUpdate is used.
	defaultStapleLife = time.Hour
)

// stapleState is what the stapler knows about the pair being served.
type stapleState struct {
	base    *tls.Certificate // the pair as loaded, without a staple
	leaf    *x509.Certificate
	issuer  *x509.Certificate // nil: cannot staple
	next    time.Time         // when to ask the responder next
	expires time.Time         // the current staple's NextUpdate (zero: none)
	tries   int               // failed attempts in a row
	off     string            // why this pair is served without stapling, once logged
}

// newStapleState prepares stapling for pair c.
func newStapleState(c *tls.Certificate) stapleState {
	st := stapleState{base: c, leaf: c.Leaf}
	switch {
	case len(c.Leaf.OCSPServer) == 0:
		st.off = "the certificate names no OCSP responder"
	case len(c.Certificate) < 2:
		st.off = "the certificate file holds no issuer certificate after the leaf"
	default:
		iss, err := x509.ParseCertificate(c.Certificate[1])
		if err != nil {
			st.off = "the issuer certificate does not parse: " + err.Error()
		} else if err := c.Leaf.CheckSignatureFrom(iss); err != nil {
			st.off = "the second certificate of the file did not sign the leaf"
		} else {
			st.issuer = iss
		}
	}
	return st
}

// staple runs one stapling step if one is due at now: it asks the responder
// and serves its answer, or drops a staple that expired. It returns when
// the next step is due (zero: never, stapling is off for this pair).
func (r *Reloader) staple(ctx context.Context, now time.Time) time.Time {
	r.mu.Lock()
	st := r.st
	r.mu.Unlock()
	if st.issuer == nil {
		if st.off != "" && !r.stapleOffLogged(st.base) {
			r.s.Logger.Warn("tls: OCSP stapling off for this certificate", "reason", st.off, "subject", st.leaf.Subject.String())
		}
		return time.Time{}
	}
	if now.Before(st.next) {
		return st.next
	}
	resp, raw, err := r.fetchOCSP(ctx, st.leaf, st.issuer, now)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.st.base != st.base {
		return now // the pair changed meanwhile: its own step is due now
	}
	if err != nil {
		r.st.tries++
		r.st.next = now.Add(r.s.StapleRetry)
		if !r.st.expires.IsZero() && !now.Before(r.st.expires) {
			r.cert.Store(r.st.base) // the staple expired: serve none rather than a stale one
			r.st.expires = time.Time{}
		}
		r.s.Logger.Warn("tls: OCSP request failed; retrying", "err", err, "responder", st.leaf.OCSPServer[0],
			"attempt", r.st.tries, "stapled_until", r.st.expires, "retry_in", r.s.StapleRetry)
		if r.s.OnStaple != nil {
			r.s.OnStaple(err, r.st.expires)
		}
		return r.st.next
	}
	expires := resp.NextUpdate
	if expires.IsZero() {
		expires = now.Add(defaultStapleLife)
	}
	c := *r.st.base
	c.OCSPStaple = raw
	r.cert.Store(&c)
	r.st.expires, r.st.tries = expires, 0
	r.st.next = resp.ThisUpdate.Add(expires.Sub(resp.ThisUpdate) / 2)
	if soonest := now.Add(r.s.StapleRetry); r.st.next.Before(soonest) {
		r.st.next = soonest
	}
	r.s.Logger.Info("tls: OCSP response stapled", "subject", st.leaf.Subject.String(), "this_update", resp.ThisUpdate,
		"next_update", expires, "refresh_at", r.st.next)
	if r.s.OnStaple != nil {
		r.s.OnStaple(nil, expires)
	}
	return r.st.next
}

// stapleOffLogged reports whether the "stapling off" line was logged for
// pair base already, and records that it now is.
func (r *Reloader) stapleOffLogged(base *tls.Certificate) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.offLogged == base {
		return true
	}
	r.offLogged = base
	return false
}

// fetchOCSP asks leaf's responder for its status and returns the parsed
// response and its raw bytes, or why they are not fit to staple.
func (r *Reloader) fetchOCSP(ctx context.Context, leaf, issuer *x509.Certificate, now time.Time) (*ocsp.Response, []byte, error) {
	reqDER, err := ocsp.CreateRequest(leaf, issuer, &ocsp.RequestOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("building the OCSP request: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, r.s.StapleTimeout)
	defer cancel()
	url := leaf.OCSPServer[0]
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(reqDER))
	if err != nil {
		return nil, nil, fmt.Errorf("OCSP responder %q: %w", url, err)
	}
	req.Header.Set("Content-Type", "application/ocsp-request")
	req.Header.Set("Accept", "application/ocsp-response")
	hr, err := r.s.StapleClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer hr.Body.Close()
	if hr.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("OCSP responder %q answered %s", url, hr.Status)
	}
	raw, err := io.ReadAll(io.LimitReader(hr.Body, maxOCSPResponse+1))
	if err != nil {
		return nil, nil, fmt.Errorf("reading the OCSP response: %w", err)
	}
	if len(raw) > maxOCSPResponse {
		return nil, nil, errors.New("the OCSP response is over 1 MiB")
	}
	resp, err := ocsp.ParseResponseForCert(raw, leaf, issuer)
	if err != nil {
		return nil, nil, fmt.Errorf("the OCSP response does not verify for this certificate: %w", err)
	}
	switch {
	case resp.Status == ocsp.Revoked:
		return nil, nil, fmt.Errorf("the responder says the certificate was revoked at %s", resp.RevokedAt.UTC().Format(time.RFC3339))
	case resp.Status != ocsp.Good:
		return nil, nil, errors.New("the responder does not know the certificate's status")
	case resp.ThisUpdate.After(now.Add(5 * time.Minute)):
		return nil, nil, fmt.Errorf("the OCSP response is dated in the future (%s)", resp.ThisUpdate.UTC().Format(time.RFC3339))
	case !resp.NextUpdate.IsZero() && !now.Before(resp.NextUpdate):
		return nil, nil, fmt.Errorf("the OCSP response expired at %s", resp.NextUpdate.UTC().Format(time.RFC3339))
	}
	return resp, raw, nil
}

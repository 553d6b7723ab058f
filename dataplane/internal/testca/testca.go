// Package testca makes certificate authorities and certificates for tests:
// a fresh ECDSA P-256 CA per call, and leaf certificates it signs for the
// names given, valid from an hour ago for a day unless told otherwise.
// Nothing here is for production use; keys never leave the test process
// except as files in the test's temporary directory.
package testca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/ocsp"
)

// CA is a test certificate authority.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

var serial atomic.Int64

// New returns a fresh CA named name.
func New(tb testing.TB, name string) *CA {
	tb.Helper()
	key := mustKey(tb)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	return &CA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

func mustKey(tb testing.TB) *ecdsa.PrivateKey {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	return key
}

// PEM returns the CA certificate as PEM.
func (c *CA) PEM() []byte { return c.pem }

// Pool returns a pool holding the CA certificate only.
func (c *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c.cert)
	return p
}

// Leaf is a certificate and key as PEM, with its serial number.
type Leaf struct {
	CertPEM, KeyPEM []byte
	Serial          *big.Int
}

// Leaf signs a server certificate for names (DNS names or IP addresses),
// valid from notBefore to notAfter; zero times mean an hour ago and a day
// from now.
func (c *CA) Leaf(tb testing.TB, notBefore, notAfter time.Time, names ...string) Leaf {
	tb.Helper()
	return c.leaf(tb, notBefore, notAfter, "", names)
}

// OCSPLeaf signs a server certificate for names, valid from an hour ago for
// a day, that names ocspURL as its OCSP responder; its CertPEM holds the
// chain (the leaf, then the CA), as a stapling server needs it.
func (c *CA) OCSPLeaf(tb testing.TB, ocspURL string, names ...string) Leaf {
	tb.Helper()
	l := c.leaf(tb, time.Time{}, time.Time{}, ocspURL, names)
	l.CertPEM = append(l.CertPEM, c.pem...)
	return l
}

// OCSPResponder answers OCSP requests (POST, RFC 6960 over HTTP) for the
// CA's certificates with responses it signs itself: status (ocsp.Good,
// ocsp.Revoked, ocsp.Unknown) of each serial number, as of a minute ago,
// valid for life. It counts the requests it answered in *n when n is not nil.
func (c *CA) OCSPResponder(tb testing.TB, life time.Duration, status func(serial *big.Int) int, n *atomic.Int64) http.Handler {
	tb.Helper()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<16))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req, err := ocsp.ParseRequest(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		now := time.Now()
		tmpl := ocsp.Response{Status: status(req.SerialNumber), SerialNumber: req.SerialNumber,
			ThisUpdate: now.Add(-time.Minute), NextUpdate: now.Add(life)}
		if tmpl.Status == ocsp.Revoked {
			tmpl.RevokedAt, tmpl.RevocationReason = now.Add(-time.Hour), ocsp.KeyCompromise
		}
		der, err := ocsp.CreateResponse(c.cert, c.cert, tmpl, c.key)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if n != nil {
			n.Add(1)
		}
		w.Header().Set("Content-Type", "application/ocsp-response")
		_, _ = w.Write(der)
	})
}

// Cert returns the CA certificate.
func (c *CA) Cert() *x509.Certificate { return c.cert }

func (c *CA) leaf(tb testing.TB, notBefore, notAfter time.Time, ocspURL string, names []string) Leaf {
	tb.Helper()
	if notBefore.IsZero() {
		notBefore = time.Now().Add(-time.Hour)
	}
	if notAfter.IsZero() {
		notAfter = time.Now().Add(24 * time.Hour)
	}
	key := mustKey(tb)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: names[0]},
		NotBefore: notBefore, NotAfter: notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if ocspURL != "" {
		tmpl.OCSPServer = []string{ocspURL}
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		tb.Fatal(err)
	}
	kd, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	return Leaf{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kd}),
		Serial:  tmpl.SerialNumber,
	}
}

// TLSCertificate returns l as a tls.Certificate.
func (l Leaf) TLSCertificate(tb testing.TB) tls.Certificate {
	tb.Helper()
	c, err := tls.X509KeyPair(l.CertPEM, l.KeyPEM)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// Write writes l to certFile and keyFile, each replaced atomically (written
// beside it, then renamed), as a careful deployment tool does.
func (l Leaf) Write(tb testing.TB, certFile, keyFile string) {
	tb.Helper()
	for _, f := range []struct {
		name string
		data []byte
	}{{certFile, l.CertPEM}, {keyFile, l.KeyPEM}} {
		tmp := filepath.Join(filepath.Dir(f.name), "."+filepath.Base(f.name)+".tmp")
		if err := os.WriteFile(tmp, f.data, 0o600); err != nil {
			tb.Fatal(err)
		}
		if err := os.Rename(tmp, f.name); err != nil {
			tb.Fatal(err)
		}
	}
}

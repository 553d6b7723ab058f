package api

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// ServerNamePatternSource is an upstream.tls.serverName: a DNS name (or an
// IPv4 address, which has the same shape). schema.json repeats it.
const ServerNamePatternSource = `^` + dnsNameSource + `$`

// CAPatternSource is the character set of upstream.tls.ca: printable ASCII
// and line breaks, as PEM is, so that its length in characters (the
// schema's) and in bytes (Go's) agree. schema.json repeats it.
const CAPatternSource = `^[\t\n\r -~]*$`

var (
	serverNamePattern = regexp.MustCompile(ServerNamePatternSource)
	caPattern         = regexp.MustCompile(CAPatternSource)
)

// validProtocol reports whether p is one of UpstreamProtocols or empty.
func validProtocol(p UpstreamProtocol) bool {
	if p == "" {
		return true
	}
	for _, q := range UpstreamProtocols {
		if p == q {
			return true
		}
	}
	return false
}

// targetScheme returns the lower-case scheme of a target URL ("" when it
// has none).
func targetScheme(u string) string {
	s, _, ok := strings.Cut(u, "://")
	if !ok {
		return ""
	}
	return strings.ToLower(s)
}

// upstreamProtocol checks up.Protocol and up.TLS against each other and
// the targets' schemes; up's path is upp.
func (v validator) upstreamProtocol(up *Upstream, upp string) {
	if !validProtocol(up.Protocol) {
		v.add(upp+".protocol", "must be http1, h2 or h2c (or absent: by each target's scheme), not %q", up.Protocol)
	} else if up.Protocol != "" {
		for i, t := range up.Targets {
			s := targetScheme(t.URL)
			if s == "" {
				continue // reported on the URL
			}
			var ok bool
			var want string
			switch up.Protocol {
			case ProtocolHTTP1:
				ok, want = s == "http" || s == "https", "http:// or https://"
			case ProtocolH2:
				ok, want = s == "https", "https:// (h2 is HTTP/2 over TLS; use h2c for cleartext)"
			case ProtocolH2C:
				ok, want = s == "http" || s == "h2c", "http:// or h2c:// (h2c is cleartext HTTP/2; use h2 for TLS)"
			}
			if !ok {
				v.add(fmt.Sprintf("%s.targets[%d].url", upp, i), "protocol %s needs %s targets", up.Protocol, want)
			}
		}
	}
	if up.TLS == nil {
		return
	}
	tp := upp + ".tls"
	for i, t := range up.Targets {
		if s := targetScheme(t.URL); s != "" && s != "https" {
			v.add(fmt.Sprintf("%s.targets[%d].url", upp, i), "tls applies to https:// targets: every target of an upstream with tls must be https://")
		}
	}
	if sn := up.TLS.ServerName; sn != "" && (len(sn) > 253 || !serverNamePattern.MatchString(sn)) {
		v.add(tp+".serverName", "%q is not a DNS name", sn)
	}
	if ca := up.TLS.CA; ca != "" {
		switch {
		case len(ca) > MaxUpstreamCABytes:
			v.add(tp+".ca", "is %d bytes; the limit is %d", len(ca), MaxUpstreamCABytes)
		case !caPattern.MatchString(ca):
			v.add(tp+".ca", "must be PEM text (printable ASCII and line breaks)")
		default:
			if _, err := ParseCAPool(ca); err != nil {
				v.add(tp+".ca", "%v", err)
			}
		}
	}
}

// ParseCAPool parses PEM text holding one or more CERTIFICATE blocks (and
// nothing else but whitespace) into a certificate pool. Errors name the
// block that is wrong.
func ParseCAPool(pemText string) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	rest := []byte(pemText)
	n := 0
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		n++
		if b.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("PEM block %d is a %q, not a CERTIFICATE", n, b.Type)
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("PEM block %d: not an X.509 certificate: %v", n, err)
		}
		pool.AddCert(c)
	}
	if strings.TrimSpace(string(rest)) != "" {
		if n == 0 {
			return nil, errors.New("holds no PEM CERTIFICATE block")
		}
		return nil, fmt.Errorf("has text after PEM block %d that is not a PEM block", n)
	}
	if n == 0 {
		return nil, errors.New("holds no PEM CERTIFICATE block")
	}
	return pool, nil
}

// ClientConfig returns the TLS client configuration for an upstream's
// https:// targets: TLS 1.2 or later, t's CA in place of the system roots
// when set, and t's ServerName when set. A nil t gives the system roots and
// each target's own host name. It fails only on a CA that Validate would
// have refused.
func (t *UpstreamTLS) ClientConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if t == nil {
		return cfg, nil
	}
	if t.CA != "" {
		pool, err := ParseCAPool(t.CA)
		if err != nil {
			return nil, fmt.Errorf("upstream tls ca: %w", err)
		}
		cfg.RootCAs = pool
	}
	cfg.ServerName = t.ServerName
	return cfg, nil
}

// normalizeUpstream leaves out of up what holds its default: a protocol
// every target's scheme already implies, and an empty tls.
func normalizeUpstream(up *Upstream) {
	if up.TLS != nil {
		up.TLS.ServerName = strings.ToLower(up.TLS.ServerName)
		if *up.TLS == (UpstreamTLS{}) {
			up.TLS = nil
		}
	}
	if up.Protocol == ProtocolHTTP1 || up.Protocol == ProtocolH2C {
		implied := len(up.Targets) > 0
		for _, t := range up.Targets {
			s := targetScheme(t.URL)
			if (up.Protocol == ProtocolHTTP1 && s != "http") || (up.Protocol == ProtocolH2C && s != "h2c") {
				implied = false
			}
		}
		if implied {
			up.Protocol = ""
		}
	}
}

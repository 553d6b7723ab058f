package http

import (
	"bytes"
	"embed"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	sluice "github.com/sluicegw/sluice/controlplane"
)

// The console: `make build` copies web/dist into console/ before the Go
// build, so one binary serves API and console. The directory always holds
// placeholder.html (committed), so a Go-only build compiles and serves a page
// that says how to build the console.
//
//go:embed all:console
var embedded embed.FS

// ContentSecurityPolicy is sent with every console response: scripts only
// from this origin (no inline or remote script), no framing. Styles may be
// inline because the component library and the editor set element styles.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; " +
	"img-src 'self' data:; font-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; " +
	"form-action 'self'; frame-ancestors 'none'"

// console is the set of files the console is served from.
type console struct {
	files fs.FS
	built bool // files has index.html; otherwise the placeholder is served
}

// newConsole serves dir when it holds a built console (index.html), else
// the embedded build, else the placeholder.
func newConsole(dir string) console {
	if dir != "" {
		if st, err := os.Stat(path.Join(dir, "index.html")); err == nil && !st.IsDir() {
			return console{files: os.DirFS(dir), built: true}
		}
	}
	sub, _ := fs.Sub(embedded, "console")
	_, err := fs.Stat(sub, "index.html")
	return console{files: sub, built: err == nil}
}

func consoleHeaders(h http.Header) {
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
}

// serve writes one file of the console with its cache policy: hashed
// assets are immutable, everything else (index.html) is revalidated.
func (s *Server) serveFile(c *gin.Context, name string, status int) bool {
	b, err := fs.ReadFile(s.console.files, name)
	if err != nil {
		return false
	}
	h := c.Writer.Header()
	consoleHeaders(h)
	if strings.HasPrefix(name, "assets/") {
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		h.Set("Cache-Control", "no-cache")
	}
	ct := mime.TypeByExtension(path.Ext(name))
	if ct == "" {
		ct = http.DetectContentType(b)
	}
	h.Set("Content-Type", ct)
	if status != http.StatusOK {
		c.Data(status, ct, b)
		return true
	}
	http.ServeContent(c.Writer, c.Request, name, time.Time{}, bytes.NewReader(b))
	return true
}

func (s *Server) index(c *gin.Context) {
	if s.console.built && s.serveFile(c, "index.html", http.StatusOK) {
		return
	}
	s.serveFile(c, "placeholder.html", http.StatusOK)
}

// noRoute serves the console's files outside /api: a file that exists, a
// 404 for a missing hashed asset (never index.html under an immutable
// policy), and index.html for every other path, the console's client-side
// routes (deep links). Unknown API paths get a problem document.
func (s *Server) noRoute(c *gin.Context) {
	p := c.Request.URL.Path
	if (c.Request.Method == http.MethodGet || c.Request.Method == http.MethodHead) && !strings.HasPrefix(p, "/api/") && p != "/api" {
		name := strings.TrimPrefix(path.Clean("/"+p), "/")
		if s.console.built && name != "" && name != "placeholder.html" && s.serveFile(c, name, http.StatusOK) {
			return
		}
		if strings.HasPrefix(name, "assets/") {
			consoleHeaders(c.Writer.Header())
			c.Header("Cache-Control", "no-store")
			c.Data(http.StatusNotFound, "text/plain; charset=utf-8", []byte("no such asset\n"))
			return
		}
		s.index(c)
		return
	}
	s.fail(c, sluice.Errorf(sluice.ENOTFOUND, "no such path: %s", p))
}

package http

import (
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/gin-gonic/gin"

	sluice "github.com/sluicegw/sluice/controlplane"
)

const placeholder = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sluice</title></head>
<body style="font-family: system-ui, sans-serif; max-width: 40em; margin: 3em auto">
<h1>Sluice control plane</h1>
<p>The console is not built (no web/dist). The admin API is at <code>/api/v1</code>;
see <code>api/openapi.yaml</code>. Health: <a href="/healthz">/healthz</a>, <a href="/readyz">/readyz</a>,
<a href="/metrics">/metrics</a>.</p>
</body></html>
`

func (s *Server) webIndex() (string, bool) {
	if s.s.WebDir == "" {
		return "", false
	}
	index := filepath.Join(s.s.WebDir, "index.html")
	if st, err := os.Stat(index); err == nil && !st.IsDir() {
		return index, true
	}
	return "", false
}

func (s *Server) index(c *gin.Context) {
	if index, ok := s.webIndex(); ok {
		c.File(index)
		return
	}
	c.Data(http.StatusOK, "text/html; charset=utf-8", []byte(placeholder))
}

// noRoute serves the console's files (and its index.html for client-side
// routes) outside /api, and a problem document for unknown API paths.
func (s *Server) noRoute(c *gin.Context) {
	p := c.Request.URL.Path
	if (c.Request.Method == http.MethodGet || c.Request.Method == http.MethodHead) && !strings.HasPrefix(p, "/api/") {
		if index, ok := s.webIndex(); ok {
			file := filepath.Join(s.s.WebDir, filepath.FromSlash(path.Clean("/"+p)))
			if st, err := os.Stat(file); err == nil && !st.IsDir() {
				c.File(file)
				return
			}
			c.File(index)
			return
		}
	}
	s.fail(c, sluice.Errorf(sluice.ENOTFOUND, "no such path: %s", p))
}

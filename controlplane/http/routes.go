package http

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/sluicegw/sluice/api"
	sluice "github.com/sluicegw/sluice/controlplane"
)

// routes registers every route with the role it needs. api/openapi.yaml
// describes each; a test keeps the two in step.
func (s *Server) routes() {
	const (
		viewer   = sluice.RoleViewer
		editor   = sluice.RoleEditor
		approver = sluice.RoleApprover
		admin    = sluice.RoleAdmin
	)
	e := s.engine
	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	e.GET("/metrics", s.metrics.handler())
	e.GET("/", s.index)

	v1 := e.Group("/api/v1", s.authenticate)
	v1.POST("/auth/login", s.handle(s.login))
	v1.POST("/auth/logout", s.need(viewer), s.handle(s.logout))
	v1.GET("/me", s.need(viewer), s.me)

	v1.GET("/namespaces", s.need(viewer), s.handle(s.listNamespaces))
	v1.POST("/namespaces", s.need(admin), s.handle(s.createNamespace))
	v1.GET("/namespaces/:ns", s.need(viewer), s.handle(s.getNamespace))

	v1.GET("/namespaces/:ns/draft", s.need(viewer), s.handle(s.getDraft))
	v1.PUT("/namespaces/:ns/draft", s.need(editor), s.handle(s.putDraft))
	v1.POST("/namespaces/:ns/draft/check", s.need(editor), s.handle(s.checkDraft))
	v1.POST("/namespaces/:ns/draft/reset", s.need(editor), s.handle(s.resetDraft))
	v1.PUT("/namespaces/:ns/draft/:kind/:id", s.need(editor), s.handle(s.putRule))
	v1.DELETE("/namespaces/:ns/draft/:kind/:id", s.need(editor), s.handle(s.deleteRule))

	v1.GET("/namespaces/:ns/changes", s.need(viewer), s.handle(s.listChanges))
	v1.POST("/namespaces/:ns/changes", s.need(editor), s.handle(s.createChange))
	v1.GET("/namespaces/:ns/changes/:id", s.need(viewer), s.handle(s.getChange))
	v1.POST("/namespaces/:ns/changes/:id/approve", s.need(approver), s.handle(s.reviewChange(sluice.Approve)))
	v1.POST("/namespaces/:ns/changes/:id/reject", s.need(approver), s.handle(s.reviewChange(sluice.Reject)))
	v1.POST("/namespaces/:ns/changes/:id/reopen", s.need(editor), s.handle(s.reopenChange))
	v1.POST("/namespaces/:ns/changes/:id/publish", s.need(approver), s.handle(s.publishChange))
	v1.POST("/namespaces/:ns/changes/:id/unschedule", s.need(approver), s.handle(s.unscheduleChange))
	v1.POST("/namespaces/:ns/changes/:id/preview", s.need(editor), s.handle(s.startPreview))
	v1.GET("/namespaces/:ns/changes/:id/preview", s.need(viewer), s.handle(s.getPreview))
	v1.DELETE("/namespaces/:ns/changes/:id/preview", s.need(editor), s.handle(s.stopPreview))

	v1.GET("/namespaces/:ns/versions", s.need(viewer), s.handle(s.listVersions))
	v1.GET("/namespaces/:ns/versions/:n", s.need(viewer), s.handle(s.getVersion))
	v1.GET("/namespaces/:ns/versions/:n/diff/:m", s.need(viewer), s.handle(s.diffVersions))
	v1.POST("/namespaces/:ns/versions/:n/rollback", s.need(editor), s.handle(s.rollback))

	v1.GET("/namespaces/:ns/nodes", s.need(viewer), s.handle(s.listNodes))
	v1.PUT("/namespaces/:ns/nodes/:id/override", s.need(approver), s.handle(s.putOverride))
	v1.DELETE("/namespaces/:ns/nodes/:id/override", s.need(approver), s.handle(s.deleteOverride))
	v1.GET("/namespaces/:ns/versions/:n/rollout", s.need(viewer), s.handle(s.getRollout))

	v1.GET("/namespaces/:ns/canary", s.need(viewer), s.handle(s.getCanary))
	v1.POST("/namespaces/:ns/canary/promote", s.need(approver), s.handle(s.endCanary(true)))
	v1.POST("/namespaces/:ns/canary/abort", s.need(approver), s.handle(s.endCanary(false)))

	v1.GET("/namespaces/:ns/stats", s.need(viewer), s.handle(s.getStats))
	v1.GET("/namespaces/:ns/events", s.need(viewer), s.handle(s.listEvents))
	v1.GET("/namespaces/:ns/stream", s.need(viewer), s.handle(s.stream))

	v1.GET("/audit", s.need(approver), s.handle(s.listAudit))
	v1.GET("/audit/verify", s.need(approver), s.handle(s.verifyAudit))

	v1.GET("/users", s.need(admin), s.handle(s.listUsers))
	v1.POST("/users", s.need(admin), s.handle(s.createUser))
	v1.PATCH("/users/:id", s.need(admin), s.handle(s.updateUser))

	v1.GET("/tokens", s.need(viewer), s.handle(s.listTokens))
	v1.POST("/tokens", s.need(viewer), s.handle(s.createToken))
	v1.DELETE("/tokens/:id", s.need(viewer), s.handle(s.revokeToken))
}

func (s *Server) healthz(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok"}) }

func (s *Server) readyz(c *gin.Context) {
	checks := map[string]string{}
	status := http.StatusOK
	for name, check := range s.s.Ready {
		ctx, cancel := context.WithTimeout(c.Request.Context(), 2*time.Second)
		err := check(ctx)
		cancel()
		if err != nil {
			checks[name] = "unavailable"
			status = http.StatusServiceUnavailable
			s.s.Logger.Warn("readiness check failed", "check", name, "err", err)
		} else {
			checks[name] = "ok"
		}
	}
	word := "ready"
	if status != http.StatusOK {
		word = "not ready"
	}
	c.JSON(status, gin.H{"status": word, "checks": checks})
}

// ---- path parameters ----

// ---- the handler adapter ----

// handler is a route's handler: it writes its answer and returns nil, or
// returns the error to answer with. Its steps (path and query parameters,
// the body, the service call) return their errors rather than write them,
// so that every route fails one way.
type handler func(c *gin.Context) error

// handle adapts h to Gin: an error h returns is written by fail (the status
// from the error code's table, a problem document) and aborts the request.
func (s *Server) handle(h handler) gin.HandlerFunc {
	return func(c *gin.Context) {
		if err := h(c); err != nil {
			s.fail(c, err)
		}
	}
}

// reply answers with status and v as JSON, unless err is set: then it
// returns err for handle to write (v is not read).
func reply(c *gin.Context, status int, v any, err error) error {
	if err != nil {
		return err
	}
	c.JSON(status, v)
	return nil
}

// nsParam returns the namespace named in the path; EINVALID when it is not
// a valid name.
func nsParam(c *gin.Context) (string, error) {
	ns := c.Param("ns")
	if !api.ValidID(ns) {
		return "", &sluice.Error{Code: sluice.EINVALID, Message: "invalid namespace name in the path",
			Fields: api.Errors{{Path: "ns", Message: "must match [a-z0-9][a-z0-9-]{0,62}"}}}
	}
	return ns, nil
}

// intParam returns the path parameter name as a positive integer (or zero
// when allowZero); EINVALID otherwise.
func intParam(c *gin.Context, name string, allowZero bool) (int64, error) {
	n, err := strconv.ParseInt(c.Param(name), 10, 64)
	if err != nil || n < 0 || (n == 0 && !allowZero) {
		return 0, &sluice.Error{Code: sluice.EINVALID, Message: "invalid number in the path",
			Fields: api.Errors{{Path: name, Message: "must be a positive integer"}}}
	}
	return n, nil
}

// nsNumber returns the namespace and the positive number name from the path
// (nsParam, then intParam).
func nsNumber(c *gin.Context, name string) (string, int64, error) {
	ns, err := nsParam(c)
	if err != nil {
		return "", 0, err
	}
	n, err := intParam(c, name, false)
	return ns, n, err
}

// intQuery returns the query parameter name as a non-negative integer, 0
// when absent; EINVALID otherwise.
func intQuery(c *gin.Context, name string) (int64, error) {
	v := c.Query(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, &sluice.Error{Code: sluice.EINVALID, Message: "invalid query parameter",
			Fields: api.Errors{{Path: name, Message: "must be a non-negative integer"}}}
	}
	return n, nil
}

// timeQuery returns the query parameter name as an RFC 3339 time, zero when
// absent; EINVALID otherwise.
func timeQuery(c *gin.Context, name string) (time.Time, error) {
	v := c.Query(name)
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, &sluice.Error{Code: sluice.EINVALID, Message: "invalid query parameter",
			Fields: api.Errors{{Path: name, Message: "must be an RFC 3339 time such as 2024-05-01T10:00:00Z"}}}
	}
	return t, nil
}

// pageQuery returns a list's ?before= cursor and ?limit= (0 when absent,
// as a filter's Limit: the services apply the defaults and caps, and return
// the next page's cursor); EINVALID when either is not a non-negative
// integer.
func pageQuery(c *gin.Context) (before int64, limit int, err error) {
	if before, err = intQuery(c, "before"); err != nil {
		return 0, 0, err
	}
	n, err := intQuery(c, "limit")
	if err != nil {
		return 0, 0, err
	}
	return before, int(min(n, math.MaxInt32)), nil
}

type list[T any] struct {
	Items []T `json:"items"`
	// Next is the cursor of the next page (pass as ?before=), 0 when none.
	Next int64 `json:"next,omitempty"`
}

// ---- namespaces ----

func (s *Server) listNamespaces(c *gin.Context) error {
	nss, err := s.s.Namespaces.FindNamespaces(c.Request.Context())
	return reply(c, http.StatusOK, list[*sluice.Namespace]{Items: nss}, err)
}

type namespaceRequest struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

func (s *Server) createNamespace(c *gin.Context) error {
	var req namespaceRequest
	if err := s.bindJSON(c, &req, false); err != nil {
		return err
	}
	ns := &sluice.Namespace{Name: req.Name, Description: req.Description}
	if err := s.s.Namespaces.CreateNamespace(c.Request.Context(), ns); err != nil {
		return err
	}
	c.Header("Location", "/api/v1/namespaces/"+ns.Name)
	c.JSON(http.StatusCreated, ns)
	return nil
}

func (s *Server) getNamespace(c *gin.Context) error {
	name, err := nsParam(c)
	if err != nil {
		return err
	}
	ns, err := s.s.Namespaces.FindNamespaceByName(c.Request.Context(), name)
	return reply(c, http.StatusOK, ns, err)
}

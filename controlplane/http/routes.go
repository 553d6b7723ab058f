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
	v1.POST("/auth/login", s.login)
	v1.POST("/auth/logout", s.need(viewer), s.logout)
	v1.GET("/me", s.need(viewer), s.me)

	v1.GET("/namespaces", s.need(viewer), s.listNamespaces)
	v1.POST("/namespaces", s.need(admin), s.createNamespace)
	v1.GET("/namespaces/:ns", s.need(viewer), s.getNamespace)

	v1.GET("/namespaces/:ns/draft", s.need(viewer), s.getDraft)
	v1.PUT("/namespaces/:ns/draft", s.need(editor), s.putDraft)
	v1.PUT("/namespaces/:ns/draft/:kind/:id", s.need(editor), s.putRule)
	v1.DELETE("/namespaces/:ns/draft/:kind/:id", s.need(editor), s.deleteRule)

	v1.GET("/namespaces/:ns/changes", s.need(viewer), s.listChanges)
	v1.POST("/namespaces/:ns/changes", s.need(editor), s.createChange)
	v1.GET("/namespaces/:ns/changes/:id", s.need(viewer), s.getChange)
	v1.POST("/namespaces/:ns/changes/:id/approve", s.need(approver), s.reviewChange(sluice.Approve))
	v1.POST("/namespaces/:ns/changes/:id/reject", s.need(approver), s.reviewChange(sluice.Reject))
	v1.POST("/namespaces/:ns/changes/:id/reopen", s.need(editor), s.reopenChange)
	v1.POST("/namespaces/:ns/changes/:id/publish", s.need(approver), s.publishChange)

	v1.GET("/namespaces/:ns/versions", s.need(viewer), s.listVersions)
	v1.GET("/namespaces/:ns/versions/:n", s.need(viewer), s.getVersion)
	v1.GET("/namespaces/:ns/versions/:n/diff/:m", s.need(viewer), s.diffVersions)
	v1.POST("/namespaces/:ns/versions/:n/rollback", s.need(editor), s.rollback)

	v1.GET("/namespaces/:ns/nodes", s.need(viewer), s.listNodes)
	v1.PUT("/namespaces/:ns/nodes/:id/override", s.need(approver), s.putOverride)
	v1.DELETE("/namespaces/:ns/nodes/:id/override", s.need(approver), s.deleteOverride)
	v1.GET("/namespaces/:ns/versions/:n/rollout", s.need(viewer), s.getRollout)

	v1.GET("/namespaces/:ns/canary", s.need(viewer), s.getCanary)
	v1.POST("/namespaces/:ns/canary/promote", s.need(approver), s.endCanary(true))
	v1.POST("/namespaces/:ns/canary/abort", s.need(approver), s.endCanary(false))

	v1.GET("/audit", s.need(approver), s.listAudit)
	v1.GET("/audit/verify", s.need(approver), s.verifyAudit)

	v1.GET("/users", s.need(admin), s.listUsers)
	v1.POST("/users", s.need(admin), s.createUser)
	v1.PATCH("/users/:id", s.need(admin), s.updateUser)

	v1.GET("/tokens", s.need(viewer), s.listTokens)
	v1.POST("/tokens", s.need(viewer), s.createToken)
	v1.DELETE("/tokens/:id", s.need(viewer), s.revokeToken)
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

func (s *Server) nsParam(c *gin.Context) (string, bool) {
	ns := c.Param("ns")
	if !api.ValidID(ns) {
		s.fail(c, &sluice.Error{Code: sluice.EINVALID, Message: "invalid namespace name in the path",
			Fields: api.Errors{{Path: "ns", Message: "must match [a-z0-9][a-z0-9-]{0,62}"}}})
		return "", false
	}
	return ns, true
}

func (s *Server) intParam(c *gin.Context, name string, allowZero bool) (int64, bool) {
	n, err := strconv.ParseInt(c.Param(name), 10, 64)
	if err != nil || n < 0 || (n == 0 && !allowZero) {
		s.fail(c, &sluice.Error{Code: sluice.EINVALID, Message: "invalid number in the path",
			Fields: api.Errors{{Path: name, Message: "must be a positive integer"}}})
		return 0, false
	}
	return n, true
}

func (s *Server) intQuery(c *gin.Context, name string) (int64, bool) {
	v := c.Query(name)
	if v == "" {
		return 0, true
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		s.fail(c, &sluice.Error{Code: sluice.EINVALID, Message: "invalid query parameter",
			Fields: api.Errors{{Path: name, Message: "must be a non-negative integer"}}})
		return 0, false
	}
	return n, true
}

func (s *Server) timeQuery(c *gin.Context, name string) (time.Time, bool) {
	v := c.Query(name)
	if v == "" {
		return time.Time{}, true
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		s.fail(c, &sluice.Error{Code: sluice.EINVALID, Message: "invalid query parameter",
			Fields: api.Errors{{Path: name, Message: "must be an RFC 3339 time such as 2024-05-01T10:00:00Z"}}})
		return time.Time{}, false
	}
	return t, true
}

// pageLimit passes a ?limit= on to a filter's Limit: the services apply the
// defaults and caps, and return the next page's cursor.
func pageLimit(limit int64) int { return int(min(limit, math.MaxInt32)) }

type list[T any] struct {
	Items []T `json:"items"`
	// Next is the cursor of the next page (pass as ?before=), 0 when none.
	Next int64 `json:"next,omitempty"`
}

// ---- namespaces ----

func (s *Server) listNamespaces(c *gin.Context) {
	nss, err := s.s.Namespaces.FindNamespaces(c.Request.Context())
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, list[*sluice.Namespace]{Items: nss})
}

type namespaceRequest struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

func (s *Server) createNamespace(c *gin.Context) {
	var req namespaceRequest
	if err := s.bindJSON(c, &req, false); err != nil {
		s.fail(c, err)
		return
	}
	ns := &sluice.Namespace{Name: req.Name, Description: req.Description}
	if err := s.s.Namespaces.CreateNamespace(c.Request.Context(), ns); err != nil {
		s.fail(c, err)
		return
	}
	c.Header("Location", "/api/v1/namespaces/"+ns.Name)
	c.JSON(http.StatusCreated, ns)
}

func (s *Server) getNamespace(c *gin.Context) {
	name, ok := s.nsParam(c)
	if !ok {
		return
	}
	ns, err := s.s.Namespaces.FindNamespaceByName(c.Request.Context(), name)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, ns)
}

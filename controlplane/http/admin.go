package http

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/sluicegw/sluice/api"
	sluice "github.com/sluicegw/sluice/controlplane"
)

// ---- audit ----

func (s *Server) listAudit(c *gin.Context) error {
	before, limit, err := pageQuery(c)
	if err != nil {
		return err
	}
	since, err := timeQuery(c, "since")
	if err != nil {
		return err
	}
	until, err := timeQuery(c, "until")
	if err != nil {
		return err
	}
	evs, next, err := s.s.Audit.FindAuditEvents(c.Request.Context(), sluice.AuditFilter{Actor: c.Query("actor"), Action: c.Query("action"),
		Namespace: c.Query("namespace"), Since: since, Until: until, Before: before, Limit: limit})
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, list[*sluice.AuditEvent]{Items: evs, Next: next})
	return nil
}

func (s *Server) verifyAudit(c *gin.Context) error {
	v, err := s.s.Audit.VerifyAudit(c.Request.Context())
	return reply(c, http.StatusOK, v, err)
}

// ---- users ----

func (s *Server) listUsers(c *gin.Context) error {
	us, err := s.s.Users.FindUsers(c.Request.Context())
	return reply(c, http.StatusOK, list[*sluice.User]{Items: us}, err)
}

type userRequest struct {
	Username string      `json:"username"`
	Password string      `json:"password"`
	Role     sluice.Role `json:"role"`
}

func (s *Server) createUser(c *gin.Context) error {
	var req userRequest
	if err := s.bindJSON(c, &req, false); err != nil {
		return err
	}
	u := &sluice.User{Username: req.Username, Role: req.Role}
	if err := s.s.Users.CreateUser(c.Request.Context(), u, req.Password); err != nil {
		return err
	}
	c.Header("Location", "/api/v1/users/"+strconv.FormatInt(u.ID, 10))
	c.JSON(http.StatusCreated, u)
	return nil
}

func (s *Server) updateUser(c *gin.Context) error {
	id, err := intParam(c, "id", false)
	if err != nil {
		return err
	}
	var upd sluice.UserUpdate
	if err := s.bindJSON(c, &upd, false); err != nil {
		return err
	}
	u, err := s.s.Users.UpdateUser(c.Request.Context(), id, upd)
	return reply(c, http.StatusOK, u, err)
}

// ---- tokens ----

type tokenRequest struct {
	Name string      `json:"name"`
	Role sluice.Role `json:"role"`
	// ExpiresAt is an RFC 3339 time, ExpiresIn a duration from now (30d,
	// 720h, 90m); at most one of them. Neither means the token does not
	// expire.
	ExpiresAt string `json:"expiresAt"`
	ExpiresIn string `json:"expiresIn"`
}

// parseExpiresIn parses a token lifetime: a number of days (30d) or a Go
// duration (720h, 90m); it must be positive and at most ten years.
func parseExpiresIn(v string) (time.Duration, error) {
	var d time.Duration
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 64)
		if err != nil || n > 3660 {
			return 0, errors.New("bad days")
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			return 0, err
		}
	}
	if d <= 0 || d > 3660*24*time.Hour {
		return 0, errors.New("out of range")
	}
	return d, nil
}

type tokenResponse struct {
	*sluice.Token
	// Secret is shown once.
	Secret string `json:"token"`
}

func (s *Server) createToken(c *gin.Context) error {
	// A token must not mint tokens: a leaked short-lived token could
	// otherwise outlive its expiry or revocation through a child token.
	if actorOf(c).TokenID != 0 {
		return sluice.Errorf(sluice.EFORBIDDEN, "API tokens are created from a console session, not with another token")
	}
	var req tokenRequest
	if err := s.bindJSON(c, &req, false); err != nil {
		return err
	}
	t := &sluice.Token{Name: req.Name, Role: req.Role}
	if req.ExpiresAt != "" {
		at, err := time.Parse(time.RFC3339, req.ExpiresAt)
		if err != nil {
			return &sluice.Error{Code: sluice.EINVALID, Message: "invalid token",
				Fields: api.Errors{{Path: "expiresAt", Message: "must be an RFC 3339 time such as 2030-01-01T00:00:00Z"}}}
		}
		t.ExpiresAt = &at
	}
	if req.ExpiresIn != "" {
		if req.ExpiresAt != "" {
			return &sluice.Error{Code: sluice.EINVALID, Message: "invalid token",
				Fields: api.Errors{{Path: "expiresIn", Message: "give expiresAt or expiresIn, not both"}}}
		}
		d, err := parseExpiresIn(req.ExpiresIn)
		if err != nil {
			return &sluice.Error{Code: sluice.EINVALID, Message: "invalid token",
				Fields: api.Errors{{Path: "expiresIn", Message: fmt.Sprintf("%q is not a lifetime such as 30d, 720h or 90m (positive, at most 3660d)", req.ExpiresIn)}}}
		}
		at := s.s.Now().Add(d)
		t.ExpiresAt = &at
	}
	secret, err := s.s.Tokens.CreateToken(c.Request.Context(), t)
	if err != nil {
		return err
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusCreated, tokenResponse{Token: t, Secret: secret})
	return nil
}

func (s *Server) listTokens(c *gin.Context) error {
	a := actorOf(c)
	f := sluice.TokenFilter{UserID: a.User.ID}
	if a.Role.Allows(sluice.RoleAdmin) {
		f.UserID = 0
	}
	ts, err := s.s.Tokens.FindTokens(c.Request.Context(), f)
	return reply(c, http.StatusOK, list[*sluice.Token]{Items: ts}, err)
}

func (s *Server) revokeToken(c *gin.Context) error {
	id, err := intParam(c, "id", false)
	if err != nil {
		return err
	}
	a := actorOf(c)
	t, err := s.s.Tokens.FindTokenByID(c.Request.Context(), id)
	if err == nil && t.UserID != a.User.ID && !a.Role.Allows(sluice.RoleAdmin) {
		err = sluice.Errorf(sluice.ENOTFOUND, "token %d not found", id) // others' tokens are not shown
	}
	if err == nil {
		err = s.s.Tokens.RevokeToken(c.Request.Context(), id)
	}
	if err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}

// ---- nodes ----

// nodeService returns the node registry; EUNAVAILABLE when there is none.
func (s *Server) nodeService() (sluice.NodeService, error) {
	if s.s.Nodes == nil {
		return nil, sluice.Errorf(sluice.EUNAVAILABLE, "the node registry (etcd) is not configured")
	}
	return s.s.Nodes, nil
}

func (s *Server) listNodes(c *gin.Context) error {
	ns, err := nsParam(c)
	if err != nil {
		return err
	}
	since, err := timeQuery(c, "goneSince")
	if err != nil {
		return err
	}
	nodes, err := s.nodeService()
	if err != nil {
		return err
	}
	if _, err := s.s.Namespaces.FindNamespaceByName(c.Request.Context(), ns); err != nil {
		return err // 404 like every other route of an unknown namespace
	}
	out, err := nodes.FindNodes(c.Request.Context(), sluice.NodeFilter{Namespace: ns, GoneSince: since})
	return reply(c, http.StatusOK, list[*sluice.Node]{Items: out}, err)
}

type overrideRequest struct {
	DegradeLevels map[string]int `json:"degradeLevels"`
	Drain         bool           `json:"drain"`
	// TTL is a Go duration such as "15m"; Expires an RFC 3339 time. At
	// most one; neither means until cleared.
	TTL     string `json:"ttl"`
	Expires string `json:"expires"`
	Reason  string `json:"reason"`
}

func (s *Server) putOverride(c *gin.Context) error {
	ns, err := nsParam(c)
	if err != nil {
		return err
	}
	var req overrideRequest
	if err := s.bindJSON(c, &req, false); err != nil {
		return err
	}
	upd := sluice.OverrideUpdate{DegradeLevels: req.DegradeLevels, Drain: req.Drain, Reason: req.Reason}
	var fields api.Errors
	if req.TTL != "" {
		d, err := time.ParseDuration(req.TTL)
		if err != nil {
			fields = append(fields, api.FieldError{Path: "ttl", Message: "must be a duration such as 90s, 15m or 2h"})
		}
		upd.TTL = d
	}
	if req.Expires != "" {
		at, err := time.Parse(time.RFC3339, req.Expires)
		if err != nil {
			fields = append(fields, api.FieldError{Path: "expires", Message: "must be an RFC 3339 time"})
		} else {
			upd.Expires = &at
		}
	}
	if len(fields) > 0 {
		return &sluice.Error{Code: sluice.EINVALID, Message: "invalid override", Fields: fields}
	}
	nodes, err := s.nodeService()
	if err != nil {
		return err
	}
	o, err := nodes.PutOverride(c.Request.Context(), ns, c.Param("id"), upd)
	return reply(c, http.StatusOK, o, err)
}

func (s *Server) deleteOverride(c *gin.Context) error {
	ns, err := nsParam(c)
	if err != nil {
		return err
	}
	nodes, err := s.nodeService()
	if err != nil {
		return err
	}
	if err := nodes.DeleteOverride(c.Request.Context(), ns, c.Param("id")); err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}

func (s *Server) getRollout(c *gin.Context) error {
	ns, n, err := nsNumber(c, "n")
	if err != nil {
		return err
	}
	nodes, err := s.nodeService()
	if err != nil {
		return err
	}
	r, err := nodes.FindRollout(c.Request.Context(), ns, n)
	return reply(c, http.StatusOK, r, err)
}

// ---- canaries ----

// canaryNode is a live node that the canary's selector matches.
type canaryNode struct {
	NodeID  string `json:"nodeId"`
	Version int64  `json:"version"`
	// Applied is whether the node runs the canary's version.
	Applied        bool   `json:"applied"`
	LastApplyError string `json:"lastApplyError,omitempty"`
}

type canaryView struct {
	*sluice.Canary
	// Nodes are the live nodes matching the selector; absent when etcd
	// cannot be read (NodesError says so).
	Nodes      []canaryNode `json:"nodes"`
	NodesError string       `json:"nodesError,omitempty"`
}

type canaryRequest struct {
	Reason string `json:"reason"`
}

// canaryService returns the canary service; EUNAVAILABLE when there is
// none.
func (s *Server) canaryService() (sluice.CanaryService, error) {
	if s.s.Canaries == nil {
		return nil, sluice.Errorf(sluice.EUNAVAILABLE, "canaries are not configured")
	}
	return s.s.Canaries, nil
}

func (s *Server) getCanary(c *gin.Context) error {
	ns, err := nsParam(c)
	if err != nil {
		return err
	}
	canaries, err := s.canaryService()
	if err != nil {
		return err
	}
	can, err := canaries.FindCanary(c.Request.Context(), ns)
	if sluice.ErrorCode(err) == sluice.ENOTFOUND {
		// No canary in progress is a normal state, not a missing resource:
		// 204, so a page that polls for one logs no error. A namespace
		// that does not exist stays a 404.
		if _, nerr := s.s.Namespaces.FindNamespaceByName(c.Request.Context(), ns); nerr != nil {
			return nerr
		}
		c.Status(http.StatusNoContent)
		return nil
	}
	if err != nil {
		return err
	}
	out := canaryView{Canary: can, Nodes: []canaryNode{}}
	if s.s.Nodes == nil {
		out.NodesError = "the node registry (etcd) is not configured"
	} else if nodes, err := s.s.Nodes.FindNodes(c.Request.Context(), sluice.NodeFilter{Namespace: ns}); err != nil {
		out.NodesError = sluice.ErrorMessage(err)
	} else {
		for _, n := range nodes {
			if n.Live && api.Selector(can.Selector).Matches(n.Labels) {
				out.Nodes = append(out.Nodes, canaryNode{NodeID: n.NodeID, Version: n.Version, Applied: n.Version == can.Version,
					LastApplyError: n.LastApplyError})
			}
		}
	}
	c.JSON(http.StatusOK, out)
	return nil
}

func (s *Server) endCanary(promote bool) handler {
	return func(c *gin.Context) error {
		ns, err := nsParam(c)
		if err != nil {
			return err
		}
		var req canaryRequest
		if err := s.bindJSON(c, &req, true); err != nil {
			return err
		}
		canaries, err := s.canaryService()
		if err != nil {
			return err
		}
		endCanary, name := canaries.AbortCanary, spanCanaryAbort
		if promote {
			endCanary, name = canaries.PromoteCanary, spanCanaryPromote
		}
		ctx, end := s.span(c.Request.Context(), name, ns)
		can, err := endCanary(ctx, ns, req.Reason)
		end(err)
		if err != nil {
			return err
		}
		c.JSON(http.StatusOK, can)
		return nil
	}
}

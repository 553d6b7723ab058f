package http

import (
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/sluicegw/sluice/api"
	sluice "github.com/sluicegw/sluice/controlplane"
)

// ---- audit ----

func (s *Server) listAudit(c *gin.Context) {
	before, ok := s.intQuery(c, "before")
	if !ok {
		return
	}
	limit, ok := s.intQuery(c, "limit")
	if !ok {
		return
	}
	since, ok := s.timeQuery(c, "since")
	if !ok {
		return
	}
	until, ok := s.timeQuery(c, "until")
	if !ok {
		return
	}
	evs, err := s.s.Audit.FindAuditEvents(c.Request.Context(), sluice.AuditFilter{Actor: c.Query("actor"), Action: c.Query("action"),
		Namespace: c.Query("namespace"), Since: since, Until: until, Before: before, Limit: int(min(limit, 1000))})
	if err != nil {
		s.fail(c, err)
		return
	}
	out := list[*sluice.AuditEvent]{Items: evs}
	size := 100
	if limit > 0 {
		size = int(min(limit, 1000))
	}
	if n := len(evs); n > 0 && n == size {
		out.Next = evs[n-1].ID
	}
	c.JSON(http.StatusOK, out)
}

func (s *Server) verifyAudit(c *gin.Context) {
	v, err := s.s.Audit.VerifyAudit(c.Request.Context())
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, v)
}

// ---- users ----

func (s *Server) listUsers(c *gin.Context) {
	us, err := s.s.Users.FindUsers(c.Request.Context())
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, list[*sluice.User]{Items: us})
}

type userRequest struct {
	Username string      `json:"username"`
	Password string      `json:"password"`
	Role     sluice.Role `json:"role"`
}

func (s *Server) createUser(c *gin.Context) {
	var req userRequest
	if err := s.bindJSON(c, &req, false); err != nil {
		s.fail(c, err)
		return
	}
	u := &sluice.User{Username: req.Username, Role: req.Role}
	if err := s.s.Users.CreateUser(c.Request.Context(), u, req.Password); err != nil {
		s.fail(c, err)
		return
	}
	c.Header("Location", "/api/v1/users/"+strconv.FormatInt(u.ID, 10))
	c.JSON(http.StatusCreated, u)
}

func (s *Server) updateUser(c *gin.Context) {
	id, ok := s.intParam(c, "id", false)
	if !ok {
		return
	}
	var upd sluice.UserUpdate
	if err := s.bindJSON(c, &upd, false); err != nil {
		s.fail(c, err)
		return
	}
	u, err := s.s.Users.UpdateUser(c.Request.Context(), id, upd)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, u)
}

// ---- tokens ----

type tokenRequest struct {
	Name string      `json:"name"`
	Role sluice.Role `json:"role"`
	// ExpiresAt is an RFC 3339 time; empty means the token does not expire.
	ExpiresAt string `json:"expiresAt"`
}

type tokenResponse struct {
	*sluice.Token
	// Secret is shown once.
	Secret string `json:"token"`
}

func (s *Server) createToken(c *gin.Context) {
	// A token must not mint tokens: a leaked short-lived token could
	// otherwise outlive its expiry or revocation through a child token.
	if actorOf(c).TokenID != 0 {
		s.fail(c, sluice.Errorf(sluice.EFORBIDDEN, "API tokens are created from a console session, not with another token"))
		return
	}
	var req tokenRequest
	if err := s.bindJSON(c, &req, false); err != nil {
		s.fail(c, err)
		return
	}
	t := &sluice.Token{Name: req.Name, Role: req.Role}
	if req.ExpiresAt != "" {
		at, err := time.Parse(time.RFC3339, req.ExpiresAt)
		if err != nil {
			s.fail(c, &sluice.Error{Code: sluice.EINVALID, Message: "invalid token",
				Fields: api.Errors{{Path: "expiresAt", Message: "must be an RFC 3339 time such as 2030-01-01T00:00:00Z"}}})
			return
		}
		t.ExpiresAt = &at
	}
	secret, err := s.s.Tokens.CreateToken(c.Request.Context(), t)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusCreated, tokenResponse{Token: t, Secret: secret})
}

func (s *Server) listTokens(c *gin.Context) {
	a := actorOf(c)
	f := sluice.TokenFilter{UserID: a.User.ID}
	if a.Role.Allows(sluice.RoleAdmin) {
		f.UserID = 0
	}
	ts, err := s.s.Tokens.FindTokens(c.Request.Context(), f)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, list[*sluice.Token]{Items: ts})
}

func (s *Server) revokeToken(c *gin.Context) {
	id, ok := s.intParam(c, "id", false)
	if !ok {
		return
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
		s.fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

// ---- nodes ----

func (s *Server) nodeService(c *gin.Context) (sluice.NodeService, bool) {
	if s.s.Nodes == nil {
		s.fail(c, sluice.Errorf(sluice.EUNAVAILABLE, "the node registry (etcd) is not configured"))
		return nil, false
	}
	return s.s.Nodes, true
}

func (s *Server) listNodes(c *gin.Context) {
	ns, ok := s.nsParam(c)
	if !ok {
		return
	}
	since, ok := s.timeQuery(c, "goneSince")
	if !ok {
		return
	}
	nodes, ok := s.nodeService(c)
	if !ok {
		return
	}
	if _, err := s.s.Namespaces.FindNamespaceByName(c.Request.Context(), ns); err != nil {
		s.fail(c, err) // 404 like every other route of an unknown namespace
		return
	}
	out, err := nodes.FindNodes(c.Request.Context(), sluice.NodeFilter{Namespace: ns, GoneSince: since})
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, list[*sluice.Node]{Items: out})
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

func (s *Server) putOverride(c *gin.Context) {
	ns, ok := s.nsParam(c)
	if !ok {
		return
	}
	var req overrideRequest
	if err := s.bindJSON(c, &req, false); err != nil {
		s.fail(c, err)
		return
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
		s.fail(c, &sluice.Error{Code: sluice.EINVALID, Message: "invalid override", Fields: fields})
		return
	}
	nodes, ok := s.nodeService(c)
	if !ok {
		return
	}
	o, err := nodes.PutOverride(c.Request.Context(), ns, c.Param("id"), upd)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, o)
}

func (s *Server) deleteOverride(c *gin.Context) {
	ns, ok := s.nsParam(c)
	if !ok {
		return
	}
	nodes, ok := s.nodeService(c)
	if !ok {
		return
	}
	if err := nodes.DeleteOverride(c.Request.Context(), ns, c.Param("id")); err != nil {
		s.fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

func (s *Server) getRollout(c *gin.Context) {
	ns, ok := s.nsParam(c)
	if !ok {
		return
	}
	n, ok := s.intParam(c, "n", false)
	if !ok {
		return
	}
	nodes, ok := s.nodeService(c)
	if !ok {
		return
	}
	r, err := nodes.FindRollout(c.Request.Context(), ns, n)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, r)
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

func (s *Server) canaryService(c *gin.Context) (sluice.CanaryService, bool) {
	if s.s.Canaries == nil {
		s.fail(c, sluice.Errorf(sluice.EUNAVAILABLE, "canaries are not configured"))
		return nil, false
	}
	return s.s.Canaries, true
}

func (s *Server) getCanary(c *gin.Context) {
	ns, ok := s.nsParam(c)
	if !ok {
		return
	}
	canaries, ok := s.canaryService(c)
	if !ok {
		return
	}
	can, err := canaries.FindCanary(c.Request.Context(), ns)
	if err != nil {
		s.fail(c, err)
		return
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
}

func (s *Server) endCanary(promote bool) gin.HandlerFunc {
	return func(c *gin.Context) {
		ns, ok := s.nsParam(c)
		if !ok {
			return
		}
		var req canaryRequest
		if err := s.bindJSON(c, &req, true); err != nil {
			s.fail(c, err)
			return
		}
		canaries, ok := s.canaryService(c)
		if !ok {
			return
		}
		end := canaries.AbortCanary
		if promote {
			end = canaries.PromoteCanary
		}
		can, err := end(c.Request.Context(), ns, req.Reason)
		if err != nil {
			s.fail(c, err)
			return
		}
		c.JSON(http.StatusOK, can)
	}
}

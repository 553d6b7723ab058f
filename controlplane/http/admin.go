package http

import (
	"encoding/json"
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

type nodeView struct {
	api.NodeStatus
	Override *api.Override `json:"override,omitempty"`
}

func (s *Server) listNodes(c *gin.Context) {
	ns, ok := s.nsParam(c)
	if !ok {
		return
	}
	if s.s.Nodes == nil {
		s.fail(c, sluice.Errorf(sluice.EUNAVAILABLE, "the node registry (etcd) is not configured"))
		return
	}
	nodes, overrides, err := s.s.Nodes.FindNodes(c.Request.Context(), ns)
	if err != nil {
		s.s.Logger.Warn("reading nodes", "err", err)
		s.fail(c, sluice.Errorf(sluice.EUNAVAILABLE, "etcd is unavailable"))
		return
	}
	out := list[nodeView]{Items: []nodeView{}}
	for _, n := range nodes {
		v := nodeView{NodeStatus: n}
		if o, ok := overrides[n.NodeID]; ok {
			v.Override = &o
		}
		out.Items = append(out.Items, v)
	}
	c.JSON(http.StatusOK, out)
}

type overrideRequest struct {
	DegradeLevels map[string]int `json:"degradeLevels"`
	Drain         bool           `json:"drain"`
	// Expires is an RFC 3339 time; empty means until changed.
	Expires string `json:"expires"`
	Reason  string `json:"reason"`
}

func (s *Server) putOverride(c *gin.Context) {
	ns, ok := s.nsParam(c)
	if !ok {
		return
	}
	nodeID := c.Param("id")
	var fields api.Errors
	if !nodeIDPattern.MatchString(nodeID) {
		fields = append(fields, api.FieldError{Path: "id", Message: "must be 1 to 128 of [A-Za-z0-9._-]"})
	}
	var req overrideRequest
	if err := s.bindJSON(c, &req, false); err != nil {
		s.fail(c, err)
		return
	}
	o := api.Override{DegradeLevels: req.DegradeLevels, Drain: req.Drain, By: actorOf(c).Name(), Reason: req.Reason}
	for id, lvl := range req.DegradeLevels {
		if !api.ValidID(id) || lvl < 0 || lvl > 2 {
			fields = append(fields, api.FieldError{Path: "degradeLevels." + id, Message: "must name a degrade rule and be 0, 1 or 2"})
		}
	}
	if req.Expires != "" {
		at, err := time.Parse(time.RFC3339, req.Expires)
		if err != nil {
			fields = append(fields, api.FieldError{Path: "expires", Message: "must be an RFC 3339 time"})
		} else {
			o.Expires = &at
		}
	}
	if len(fields) > 0 {
		s.fail(c, &sluice.Error{Code: sluice.EINVALID, Message: "invalid override", Fields: fields})
		return
	}
	if s.s.Nodes == nil {
		s.fail(c, sluice.Errorf(sluice.EUNAVAILABLE, "the node registry (etcd) is not configured"))
		return
	}
	written, err := s.s.Nodes.PutOverride(c.Request.Context(), ns, nodeID, o)
	if err != nil {
		s.s.Logger.Warn("writing override", "err", err)
		s.fail(c, sluice.Errorf(sluice.EUNAVAILABLE, "etcd is unavailable"))
		return
	}
	after, _ := json.Marshal(written)
	if err := s.s.Audit.RecordAuditEvent(c.Request.Context(), &sluice.AuditEvent{Action: sluice.ActionNodeOverride,
		Object: "namespace/" + ns + "/node/" + nodeID, Namespace: ns, After: after}); err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, written)
}

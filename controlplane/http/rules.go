package http

import (
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/sluicegw/sluice/api"
	sluice "github.com/sluicegw/sluice/controlplane"
)

func draftETag(rev int64) string { return `"` + strconv.FormatInt(rev, 10) + `"` }

// ifRevision reads If-Match as a draft revision: nil for none or "*".
// A value that is no revision of ours can never match.
func (s *Server) ifRevision(c *gin.Context, required bool) (*int64, bool) {
	h := strings.TrimSpace(c.GetHeader("If-Match"))
	switch {
	case h == "" && required:
		s.fail(c, sluice.Errorf(sluice.EPRECONDITIONREQUIRED, "send If-Match with the draft's ETag (from GET .../draft), or * to overwrite whatever is there"))
		return nil, false
	case h == "" || h == "*":
		return nil, true
	}
	rev, err := strconv.ParseInt(strings.Trim(strings.TrimPrefix(h, "W/"), `"`), 10, 64)
	if err != nil || rev <= 0 {
		rev = -1
	}
	return &rev, true
}

// document reads a rule document or rule body, JSON or YAML.
func (s *Server) document(c *gin.Context) ([]byte, error) {
	if ct := c.GetHeader("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		switch {
		case err != nil:
			return nil, sluice.Errorf(sluice.EUNSUPPORTED, "unreadable Content-Type %q", ct)
		case mt == "application/json", mt == "application/yaml", mt == "application/x-yaml", mt == "text/yaml",
			mt == "text/x-yaml", mt == "text/plain", strings.HasSuffix(mt, "+json"), strings.HasSuffix(mt, "+yaml"):
		default:
			return nil, sluice.Errorf(sluice.EUNSUPPORTED, "send the rules as application/json or application/yaml, not %s", mt)
		}
	}
	b, err := s.body(c)
	if err != nil {
		return nil, err
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		return nil, sluice.Errorf(sluice.EINVALID, "the body is empty")
	}
	return b, nil
}

type draftResponse struct {
	Namespace string `json:"namespace"`
	Revision  int64  `json:"revision"`
	ETag      string `json:"etag"`
	Checksum  string `json:"checksum"`
	UpdatedBy string `json:"updatedBy"`
	UpdatedAt string `json:"updatedAt"`
}

func (s *Server) draftMeta(c *gin.Context, status int, d *sluice.Draft) {
	c.Header("ETag", draftETag(d.Revision))
	c.JSON(status, draftResponse{Namespace: d.Namespace, Revision: d.Revision, ETag: draftETag(d.Revision), Checksum: d.Checksum,
		UpdatedBy: d.UpdatedBy, UpdatedAt: d.UpdatedAt.Format("2006-01-02T15:04:05.999999Z07:00")})
}

func (s *Server) getDraft(c *gin.Context) {
	ns, ok := s.nsParam(c)
	if !ok {
		return
	}
	rev, err := s.s.Drafts.FindDraftRevision(c.Request.Context(), ns)
	if err != nil {
		s.fail(c, err)
		return
	}
	if c.GetHeader("If-None-Match") == draftETag(rev) {
		c.Header("ETag", draftETag(rev))
		c.Status(http.StatusNotModified)
		return
	}
	if e := s.drafts.get(ns, rev); e != nil {
		e.write(c)
		return
	}
	d, err := s.s.Drafts.FindDraft(c.Request.Context(), ns)
	if err != nil {
		s.fail(c, err)
		return
	}
	s.drafts.put(ns, d.Revision, d.Checksum, d.Document).write(c)
}

func (s *Server) putDraft(c *gin.Context) {
	ns, ok := s.nsParam(c)
	if !ok {
		return
	}
	rev, ok := s.ifRevision(c, true)
	if !ok {
		return
	}
	b, err := s.document(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	rs, err := api.Decode(b)
	if err != nil {
		s.fail(c, sluice.Invalid("the rule set is invalid", err))
		return
	}
	d, err := s.s.Drafts.UpdateDraft(c.Request.Context(), ns, sluice.DraftUpdate{IfRevision: rev, RuleSet: rs})
	if err != nil {
		s.fail(c, err)
		return
	}
	s.draftMeta(c, http.StatusOK, d)
}

func (s *Server) ruleUpdate(c *gin.Context, del bool) {
	ns, ok := s.nsParam(c)
	if !ok {
		return
	}
	rev, ok := s.ifRevision(c, false)
	if !ok {
		return
	}
	upd := sluice.DraftUpdate{IfRevision: rev, Kind: c.Param("kind"), ID: c.Param("id"), Delete: del}
	if !del {
		b, err := s.document(c)
		if err != nil {
			s.fail(c, err)
			return
		}
		upd.Rule = b
	}
	d, err := s.s.Drafts.UpdateDraft(c.Request.Context(), ns, upd)
	if err != nil {
		s.fail(c, err)
		return
	}
	s.draftMeta(c, http.StatusOK, d)
}

func (s *Server) putRule(c *gin.Context)    { s.ruleUpdate(c, false) }
func (s *Server) deleteRule(c *gin.Context) { s.ruleUpdate(c, true) }

// ---- changes ----

func (s *Server) listChanges(c *gin.Context) {
	ns, ok := s.nsParam(c)
	if !ok {
		return
	}
	before, ok := s.intQuery(c, "before")
	if !ok {
		return
	}
	limit, ok := s.intQuery(c, "limit")
	if !ok {
		return
	}
	state := sluice.ChangeState(c.Query("state"))
	switch state {
	case "", sluice.ChangeOpen, sluice.ChangeApproved, sluice.ChangeRejected, sluice.ChangePublished:
	default:
		s.fail(c, &sluice.Error{Code: sluice.EINVALID, Message: "invalid query parameter",
			Fields: api.Errors{{Path: "state", Message: "must be open, approved, rejected or published"}}})
		return
	}
	if _, err := s.s.Namespaces.FindNamespaceByName(c.Request.Context(), ns); err != nil {
		s.fail(c, err)
		return
	}
	cs, err := s.s.Changes.FindChanges(c.Request.Context(), sluice.ChangeFilter{Namespace: ns, State: state,
		Author: c.Query("author"), Before: before, Limit: int(min(limit, 500))})
	if err != nil {
		s.fail(c, err)
		return
	}
	out := list[*sluice.Change]{Items: cs}
	if n := len(cs); n > 0 && n == pageSize(limit, 50) {
		out.Next = cs[n-1].ID
	}
	c.JSON(http.StatusOK, out)
}

func pageSize(limit int64, def int) int {
	if limit <= 0 {
		return def
	}
	return int(min(limit, 500))
}

type changeRequest struct {
	Title       string `json:"title"`
	Description string `json:"description"`
}

func (s *Server) createChange(c *gin.Context) {
	ns, ok := s.nsParam(c)
	if !ok {
		return
	}
	var req changeRequest
	if err := s.bindJSON(c, &req, false); err != nil {
		s.fail(c, err)
		return
	}
	ch := &sluice.Change{Namespace: ns, Title: req.Title, Description: req.Description}
	if err := s.s.Changes.CreateChange(c.Request.Context(), ch); err != nil {
		s.fail(c, err)
		return
	}
	full, err := s.s.Changes.FindChangeByID(c.Request.Context(), ns, ch.ID)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.Header("Location", "/api/v1/namespaces/"+ns+"/changes/"+strconv.FormatInt(ch.ID, 10))
	c.JSON(http.StatusCreated, full)
}

func (s *Server) getChange(c *gin.Context) {
	ns, ok := s.nsParam(c)
	if !ok {
		return
	}
	id, ok := s.intParam(c, "id", false)
	if !ok {
		return
	}
	ch, err := s.s.Changes.FindChangeByID(c.Request.Context(), ns, id)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, ch)
}

type reviewRequest struct {
	Comment string `json:"comment"`
}

func (s *Server) reviewChange(d sluice.Decision) gin.HandlerFunc {
	return func(c *gin.Context) {
		ns, ok := s.nsParam(c)
		if !ok {
			return
		}
		id, ok := s.intParam(c, "id", false)
		if !ok {
			return
		}
		var req reviewRequest
		if err := s.bindJSON(c, &req, true); err != nil {
			s.fail(c, err)
			return
		}
		ch, err := s.s.Changes.UpdateChange(c.Request.Context(), ns, id, sluice.ChangeUpdate{Decision: d, Comment: req.Comment})
		if err != nil {
			s.fail(c, err)
			return
		}
		c.JSON(http.StatusOK, ch)
	}
}

func (s *Server) reopenChange(c *gin.Context) {
	ns, ok := s.nsParam(c)
	if !ok {
		return
	}
	id, ok := s.intParam(c, "id", false)
	if !ok {
		return
	}
	var req reviewRequest
	if err := s.bindJSON(c, &req, true); err != nil {
		s.fail(c, err)
		return
	}
	ch, err := s.s.Changes.ReopenChange(c.Request.Context(), ns, id, req.Comment)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, ch)
}

// publishRequest is the optional body of a publication.
type publishRequest struct {
	Canary *sluice.CanarySpec `json:"canary"`
}

func (s *Server) publishChange(c *gin.Context) {
	ns, ok := s.nsParam(c)
	if !ok {
		return
	}
	id, ok := s.intParam(c, "id", false)
	if !ok {
		return
	}
	var req publishRequest
	if err := s.bindJSON(c, &req, true); err != nil {
		s.fail(c, err)
		return
	}
	v, err := s.s.Changes.PublishChange(c.Request.Context(), ns, id, sluice.PublishOptions{Canary: req.Canary})
	if err != nil {
		s.fail(c, err)
		return
	}
	c.Header("Location", "/api/v1/namespaces/"+ns+"/versions/"+strconv.FormatInt(v.Number, 10))
	c.JSON(http.StatusCreated, v)
}

// ---- versions ----

func (s *Server) listVersions(c *gin.Context) {
	ns, ok := s.nsParam(c)
	if !ok {
		return
	}
	before, ok := s.intQuery(c, "before")
	if !ok {
		return
	}
	limit, ok := s.intQuery(c, "limit")
	if !ok {
		return
	}
	if _, err := s.s.Namespaces.FindNamespaceByName(c.Request.Context(), ns); err != nil {
		s.fail(c, err)
		return
	}
	vs, err := s.s.Versions.FindVersions(c.Request.Context(), sluice.VersionFilter{Namespace: ns, Before: before, Limit: int(min(limit, 500))})
	if err != nil {
		s.fail(c, err)
		return
	}
	out := list[*sluice.Version]{Items: vs}
	if n := len(vs); n > 0 && n == pageSize(limit, 50) {
		out.Next = vs[n-1].Number
	}
	c.JSON(http.StatusOK, out)
}

func (s *Server) getVersion(c *gin.Context) {
	ns, ok := s.nsParam(c)
	if !ok {
		return
	}
	n, ok := s.intParam(c, "n", false)
	if !ok {
		return
	}
	v, err := s.s.Versions.FindVersion(c.Request.Context(), ns, n)
	if err != nil {
		s.fail(c, err)
		return
	}
	etag := `"` + v.Checksum + `"`
	c.Header("ETag", etag)
	c.Header("X-Sluice-Version", strconv.FormatInt(v.Number, 10))
	c.Header("X-Sluice-Checksum", v.Checksum)
	if c.GetHeader("If-None-Match") == etag {
		c.Status(http.StatusNotModified)
		return
	}
	c.Data(http.StatusOK, "application/json", v.Document)
}

func (s *Server) diffVersions(c *gin.Context) {
	ns, ok := s.nsParam(c)
	if !ok {
		return
	}
	a, ok := s.intParam(c, "n", true)
	if !ok {
		return
	}
	b, ok := s.intParam(c, "m", true)
	if !ok {
		return
	}
	d, err := s.s.Versions.DiffVersions(c.Request.Context(), ns, a, b)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, d)
}

type rollbackRequest struct {
	Reason    string `json:"reason"`
	Emergency bool   `json:"emergency"`
}

type rollbackResponse struct {
	Change  *sluice.Change  `json:"change,omitempty"`
	Version *sluice.Version `json:"version,omitempty"`
}

func (s *Server) rollback(c *gin.Context) {
	ns, ok := s.nsParam(c)
	if !ok {
		return
	}
	n, ok := s.intParam(c, "n", false)
	if !ok {
		return
	}
	var req rollbackRequest
	if err := s.bindJSON(c, &req, true); err != nil {
		s.fail(c, err)
		return
	}
	ch, v, err := s.s.Versions.RollbackVersion(c.Request.Context(), ns, n, sluice.Rollback{Reason: req.Reason, Emergency: req.Emergency})
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, rollbackResponse{Change: ch, Version: v})
}

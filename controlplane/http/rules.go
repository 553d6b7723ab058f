package http

import (
	"fmt"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicegw/sluice/api"
	sluice "github.com/sluicegw/sluice/controlplane"
)

func draftETag(rev int64) string { return `"` + strconv.FormatInt(rev, 10) + `"` }

// precondition evaluates If-Match (RFC 9110 §13.1.1) against the draft's
// current revision before the body is read, so that a stale precondition
// is answered 412 whatever the body holds. It returns the revision the
// write must still find (the transaction re-checks it), or nil for no
// condition. If-Match is a list of strong entity tags, or *: a weak tag
// (W/"19") never matches, since If-Match compares strongly; "1", "19"
// matches revision 19. A missing header is 428 when required, a malformed
// one 400.
func (s *Server) precondition(c *gin.Context, ns string, required bool) (*int64, error) {
	h := strings.TrimSpace(strings.Join(c.Request.Header.Values("If-Match"), ","))
	if h == "" {
		if required {
			return nil, sluice.Errorf(sluice.EPRECONDITIONREQUIRED, "send If-Match with the draft's ETag (from GET .../draft), or * to overwrite whatever is there")
		}
		return nil, nil
	}
	tags, star, err := parseIfMatch(h)
	if err != nil {
		return nil, &sluice.Error{Code: sluice.EINVALID, Message: "invalid If-Match header",
			Fields: api.Errors{{Path: "If-Match", Message: err.Error()}}}
	}
	rev, err := s.s.Drafts.FindDraftRevision(c.Request.Context(), ns)
	if err != nil {
		return nil, err
	}
	if star {
		return nil, nil
	}
	for _, t := range tags {
		if t == draftETag(rev) {
			return &rev, nil
		}
	}
	return nil, sluice.Errorf(sluice.EPRECONDITION, "the draft changed (its ETag is %s, not %s); reload it and retry", draftETag(rev), h)
}

// parseIfMatch splits an If-Match value into its strong entity tags (each
// with its quotes); weak tags are dropped, as they never match strongly. star
// reports "*".
func parseIfMatch(h string) (tags []string, star bool, err error) {
	if h == "*" {
		return nil, true, nil
	}
	rest := h
	for {
		rest = strings.TrimLeft(rest, " \t")
		weak := strings.HasPrefix(rest, "W/")
		if weak {
			rest = rest[2:]
		}
		if !strings.HasPrefix(rest, `"`) {
			return nil, false, fmt.Errorf("%q is not * or a list of quoted entity tags such as \"19\"", h)
		}
		end := strings.IndexByte(rest[1:], '"')
		if end < 0 {
			return nil, false, fmt.Errorf("%q has an unterminated entity tag", h)
		}
		tag := rest[:end+2]
		for _, r := range tag[1 : len(tag)-1] {
			if r < 0x21 || r == 0x7f {
				return nil, false, fmt.Errorf("%q has a space or control character in an entity tag", h)
			}
		}
		if !weak {
			tags = append(tags, tag)
		}
		rest = strings.TrimLeft(rest[end+2:], " \t")
		if rest == "" {
			return tags, false, nil
		}
		if rest[0] != ',' {
			return nil, false, fmt.Errorf("%q: entity tags must be separated by commas", h)
		}
		rest = strings.TrimLeft(rest[1:], " \t")
		if rest == "" { // a trailing comma is tolerated (RFC 9110 §5.6.1)
			return tags, false, nil
		}
	}
}

// mediaType refuses a Content-Type that is not a rule document's.
func mediaType(c *gin.Context) error {
	ct := c.GetHeader("Content-Type")
	if ct == "" {
		return nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	switch {
	case err != nil:
		return sluice.Errorf(sluice.EUNSUPPORTED, "unreadable Content-Type %q", ct)
	case mt == "application/json", mt == "application/yaml", mt == "application/x-yaml", mt == "text/yaml",
		mt == "text/x-yaml", mt == "text/plain", strings.HasSuffix(mt, "+json"), strings.HasSuffix(mt, "+yaml"):
		return nil
	default:
		return sluice.Errorf(sluice.EUNSUPPORTED, "send the rules as application/json or application/yaml, not %s", mt)
	}
}

// document reads a rule document or rule body, JSON or YAML.
func (s *Server) document(c *gin.Context) ([]byte, error) {
	if err := mediaType(c); err != nil {
		return nil, err
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

func (s *Server) getDraft(c *gin.Context) error {
	ns, err := nsParam(c)
	if err != nil {
		return err
	}
	rev, err := s.s.Drafts.FindDraftRevision(c.Request.Context(), ns)
	if err != nil {
		return err
	}
	if c.GetHeader("If-None-Match") == draftETag(rev) {
		c.Header("ETag", draftETag(rev))
		c.Status(http.StatusNotModified)
		return nil
	}
	if e := s.drafts.get(ns, rev); e != nil {
		e.write(c)
		return nil
	}
	d, err := s.s.Drafts.FindDraft(c.Request.Context(), ns)
	if err != nil {
		return err
	}
	s.drafts.put(ns, d.Revision, d.Checksum, d.Document).write(c)
	return nil
}

func (s *Server) putDraft(c *gin.Context) error {
	ns, err := nsParam(c)
	if err != nil {
		return err
	}
	// 415 is decided from the headers alone, so it comes before the
	// precondition; validating the body comes after it (RFC 9110 §13.2.2).
	if err := mediaType(c); err != nil {
		return err
	}
	rev, err := s.precondition(c, ns, true)
	if err != nil {
		return err
	}
	b, err := s.document(c)
	if err != nil {
		return err
	}
	rs, err := api.Decode(b)
	if err != nil {
		return sluice.Invalid("the rule set is invalid", err)
	}
	d, err := s.s.Drafts.UpdateDraft(c.Request.Context(), ns, sluice.DraftUpdate{IfRevision: rev, RuleSet: rs})
	if err != nil {
		return err
	}
	s.draftMeta(c, http.StatusOK, d)
	return nil
}

// checkDraft validates a posted rule set and compares it with the newest
// version, storing nothing: the console calls it as the user types.
func (s *Server) checkDraft(c *gin.Context) error {
	ns, err := nsParam(c)
	if err != nil {
		return err
	}
	if err := mediaType(c); err != nil {
		return err
	}
	b, err := s.document(c)
	if err != nil {
		return err
	}
	rs, err := api.Decode(b)
	if err != nil {
		// A document that does not decode (an unknown field, a wrong
		// type) is answered like one that does not validate.
		if _, ferr := s.s.Namespaces.FindNamespaceByName(c.Request.Context(), ns); ferr != nil {
			return ferr
		}
		c.JSON(http.StatusOK, sluice.DraftCheck{Errors: invalidFields(err), Warnings: []api.Warning{}})
		return nil
	}
	out, err := s.s.Drafts.CheckDraft(c.Request.Context(), ns, rs)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, out)
	return nil
}

// invalidFields are a decoding error's fields, or the error as one.
func invalidFields(err error) api.Errors {
	if f := api.AsErrors(err); len(f) > 0 {
		return f
	}
	return api.Errors{{Message: err.Error()}}
}

// resetDraft replaces the draft with the newest version's rules.
func (s *Server) resetDraft(c *gin.Context) error {
	ns, err := nsParam(c)
	if err != nil {
		return err
	}
	rev, err := s.precondition(c, ns, false)
	if err != nil {
		return err
	}
	d, err := s.s.Drafts.ResetDraft(c.Request.Context(), ns, rev)
	if err != nil {
		return err
	}
	s.draftMeta(c, http.StatusOK, d)
	return nil
}

func (s *Server) ruleUpdate(c *gin.Context, del bool) error {
	ns, err := nsParam(c)
	if err != nil {
		return err
	}
	if !del {
		if err := mediaType(c); err != nil {
			return err
		}
	}
	rev, err := s.precondition(c, ns, false)
	if err != nil {
		return err
	}
	upd := sluice.DraftUpdate{IfRevision: rev, Kind: c.Param("kind"), ID: c.Param("id"), Delete: del}
	if !del {
		b, err := s.document(c)
		if err != nil {
			return err
		}
		upd.Rule = b
	}
	d, err := s.s.Drafts.UpdateDraft(c.Request.Context(), ns, upd)
	if err != nil {
		return err
	}
	s.draftMeta(c, http.StatusOK, d)
	return nil
}

func (s *Server) putRule(c *gin.Context) error    { return s.ruleUpdate(c, false) }
func (s *Server) deleteRule(c *gin.Context) error { return s.ruleUpdate(c, true) }

// ---- changes ----

func (s *Server) listChanges(c *gin.Context) error {
	ns, err := nsParam(c)
	if err != nil {
		return err
	}
	before, limit, err := pageQuery(c)
	if err != nil {
		return err
	}
	state := sluice.ChangeState(c.Query("state"))
	switch state {
	case "", sluice.ChangeOpen, sluice.ChangeApproved, sluice.ChangeRejected, sluice.ChangePublished:
	default:
		return &sluice.Error{Code: sluice.EINVALID, Message: "invalid query parameter",
			Fields: api.Errors{{Path: "state", Message: "must be open, approved, rejected or published"}}}
	}
	if _, err := s.s.Namespaces.FindNamespaceByName(c.Request.Context(), ns); err != nil {
		return err
	}
	cs, next, err := s.s.Changes.FindChanges(c.Request.Context(), sluice.ChangeFilter{Namespace: ns, State: state,
		Author: c.Query("author"), Before: before, Limit: limit})
	if err != nil {
		return err
	}
	s.nodeWarnings(c, ns, cs...)
	c.JSON(http.StatusOK, list[*sluice.Change]{Items: cs, Next: next})
	return nil
}

type changeRequest struct {
	Title       string `json:"title"`
	Description string `json:"description"`
}

func (s *Server) createChange(c *gin.Context) error {
	ns, err := nsParam(c)
	if err != nil {
		return err
	}
	var req changeRequest
	if err := s.bindJSON(c, &req, false); err != nil {
		return err
	}
	ch := &sluice.Change{Namespace: ns, Title: req.Title, Description: req.Description}
	if err := s.s.Changes.CreateChange(c.Request.Context(), ch); err != nil {
		return err
	}
	full, err := s.s.Changes.FindChangeByID(c.Request.Context(), ns, ch.ID)
	if err != nil {
		return err
	}
	s.nodeWarnings(c, ns, full)
	c.Header("Location", "/api/v1/namespaces/"+ns+"/changes/"+strconv.FormatInt(ch.ID, 10))
	c.JSON(http.StatusCreated, full)
	return nil
}

func (s *Server) getChange(c *gin.Context) error {
	ns, id, err := nsNumber(c, "id")
	if err != nil {
		return err
	}
	ch, err := s.s.Changes.FindChangeByID(c.Request.Context(), ns, id)
	if err != nil {
		return err
	}
	s.nodeWarnings(c, ns, ch)
	c.JSON(http.StatusOK, ch)
	return nil
}

type reviewRequest struct {
	Comment string `json:"comment"`
}

func (s *Server) reviewChange(d sluice.Decision) handler {
	return func(c *gin.Context) error {
		ns, id, err := nsNumber(c, "id")
		if err != nil {
			return err
		}
		var req reviewRequest
		if err := s.bindJSON(c, &req, true); err != nil {
			return err
		}
		ch, err := s.s.Changes.UpdateChange(c.Request.Context(), ns, id, sluice.ChangeUpdate{Decision: d, Comment: req.Comment})
		if err != nil {
			return err
		}
		if d == sluice.Reject {
			s.endPreview(c, ns, id, sluice.PreviewEndRejected)
		}
		s.nodeWarnings(c, ns, ch)
		c.JSON(http.StatusOK, ch)
		return nil
	}
}

func (s *Server) reopenChange(c *gin.Context) error {
	ns, id, err := nsNumber(c, "id")
	if err != nil {
		return err
	}
	var req reviewRequest
	if err := s.bindJSON(c, &req, true); err != nil {
		return err
	}
	ch, err := s.s.Changes.ReopenChange(c.Request.Context(), ns, id, req.Comment)
	if err != nil {
		return err
	}
	s.endPreview(c, ns, id, sluice.PreviewEndEdited) // rebased: a new base, a fresh approval
	s.nodeWarnings(c, ns, ch)
	c.JSON(http.StatusOK, ch)
	return nil
}

// publishRequest is the optional body of a publication.
type publishRequest struct {
	Canary *sluice.CanarySpec `json:"canary"`
	// At, an RFC 3339 time, schedules the publication (202 with the
	// change) instead.
	At *string `json:"at"`
}

func (s *Server) publishChange(c *gin.Context) error {
	ns, id, err := nsNumber(c, "id")
	if err != nil {
		return err
	}
	var req publishRequest
	if err := s.bindJSON(c, &req, true); err != nil {
		return err
	}
	if req.At != nil {
		if req.Canary != nil {
			return &sluice.Error{Code: sluice.EINVALID, Message: "invalid publication",
				Fields: api.Errors{{Path: "at", Message: "a scheduled publication goes to every node; it cannot be a canary"}}}
		}
		at, err := time.Parse(time.RFC3339, *req.At)
		if err != nil {
			return &sluice.Error{Code: sluice.EINVALID, Message: "invalid publication",
				Fields: api.Errors{{Path: "at", Message: fmt.Sprintf("%q is not an RFC 3339 time such as 2026-12-01T18:00:00Z", *req.At)}}}
		}
		ch, err := s.s.Changes.ScheduleChange(c.Request.Context(), ns, id, at)
		if err != nil {
			return err
		}
		s.nodeWarnings(c, ns, ch)
		c.JSON(http.StatusAccepted, ch)
		return nil
	}
	ctx, end := s.span(c.Request.Context(), spanChangePublish, ns, attribute.Int64("sluice.change", id), attribute.Bool("sluice.canary", req.Canary != nil))
	v, err := s.s.Changes.PublishChange(ctx, ns, id, sluice.PublishOptions{Canary: req.Canary})
	if err == nil {
		trace.SpanFromContext(ctx).SetAttributes(attribute.Int64("sluice.version", v.Number))
	}
	end(err)
	if err != nil {
		return err
	}
	s.endPreview(c, ns, id, sluice.PreviewEndPublished)
	c.Header("Location", "/api/v1/namespaces/"+ns+"/versions/"+strconv.FormatInt(v.Number, 10))
	c.JSON(http.StatusCreated, v)
	return nil
}

func (s *Server) unscheduleChange(c *gin.Context) error {
	ns, id, err := nsNumber(c, "id")
	if err != nil {
		return err
	}
	ch, err := s.s.Changes.UnscheduleChange(c.Request.Context(), ns, id)
	if err != nil {
		return err
	}
	s.nodeWarnings(c, ns, ch)
	c.JSON(http.StatusOK, ch)
	return nil
}

// ---- versions ----

func (s *Server) listVersions(c *gin.Context) error {
	ns, err := nsParam(c)
	if err != nil {
		return err
	}
	before, limit, err := pageQuery(c)
	if err != nil {
		return err
	}
	if _, err := s.s.Namespaces.FindNamespaceByName(c.Request.Context(), ns); err != nil {
		return err
	}
	vs, next, err := s.s.Versions.FindVersions(c.Request.Context(), sluice.VersionFilter{Namespace: ns, Before: before, Limit: limit})
	return reply(c, http.StatusOK, list[*sluice.Version]{Items: vs, Next: next}, err)
}

func (s *Server) getVersion(c *gin.Context) error {
	ns, n, err := nsNumber(c, "n")
	if err != nil {
		return err
	}
	v, err := s.s.Versions.FindVersion(c.Request.Context(), ns, n)
	if err != nil {
		return err
	}
	etag := `"` + v.Checksum + `"`
	c.Header("ETag", etag)
	c.Header("X-Sluice-Version", strconv.FormatInt(v.Number, 10))
	c.Header("X-Sluice-Checksum", v.Checksum)
	if c.GetHeader("If-None-Match") == etag {
		c.Status(http.StatusNotModified)
		return nil
	}
	c.Data(http.StatusOK, "application/json", v.Document)
	return nil
}

func (s *Server) diffVersions(c *gin.Context) error {
	ns, err := nsParam(c)
	if err != nil {
		return err
	}
	a, err := intParam(c, "n", true)
	if err != nil {
		return err
	}
	b, err := intParam(c, "m", true)
	if err != nil {
		return err
	}
	d, err := s.s.Versions.DiffVersions(c.Request.Context(), ns, a, b)
	return reply(c, http.StatusOK, d, err)
}

type rollbackRequest struct {
	Reason    string `json:"reason"`
	Emergency bool   `json:"emergency"`
}

type rollbackResponse struct {
	Change  *sluice.Change  `json:"change,omitempty"`
	Version *sluice.Version `json:"version,omitempty"`
}

func (s *Server) rollback(c *gin.Context) error {
	ns, n, err := nsNumber(c, "n")
	if err != nil {
		return err
	}
	var req rollbackRequest
	if err := s.bindJSON(c, &req, true); err != nil {
		return err
	}
	rb := sluice.Rollback{Reason: req.Reason, Emergency: req.Emergency}
	if rb.Emergency {
		rb.Applied, rb.AppliedUnknown = s.appliedVersions(c, ns)
	}
	ctx, end := s.span(c.Request.Context(), spanRollback, ns, attribute.Int64("sluice.version", n), attribute.Bool("sluice.emergency", rb.Emergency))
	ch, v, err := s.s.Versions.RollbackVersion(ctx, ns, n, rb)
	end(err)
	if err != nil {
		return err
	}
	if ch != nil {
		s.nodeWarnings(c, ns, ch)
	}
	c.JSON(http.StatusCreated, rollbackResponse{Change: ch, Version: v})
	return nil
}

// appliedVersions returns the versions ns's live nodes report running, and
// true when the node registry could not be read (or is not configured).
func (s *Server) appliedVersions(c *gin.Context, ns string) ([]int64, bool) {
	if s.s.Nodes == nil {
		return nil, true
	}
	nodes, err := s.s.Nodes.FindNodes(c.Request.Context(), sluice.NodeFilter{Namespace: ns})
	if err != nil {
		s.s.Logger.Warn("emergency rollback: reading the nodes", "namespace", ns, "err", err)
		return nil, true
	}
	var out []int64
	for _, n := range nodes {
		if n.Live && n.Version > 0 {
			out = append(out, n.Version)
		}
	}
	return out, false
}

// nodeWarnings adds to open and approved changes that add a cluster limit
// the warning that needs the namespace's live nodes (sluice.RedisWarning),
// reading the nodes once. A registry that cannot be read is said so in the
// warning.
func (s *Server) nodeWarnings(c *gin.Context, ns string, chs ...*sluice.Change) {
	var need []*sluice.Change
	for _, ch := range chs {
		if ch.Warnings == nil {
			ch.Warnings = []api.Warning{}
		}
		if ch.State != sluice.ChangeOpen && ch.State != sluice.ChangeApproved {
			continue
		}
		for _, w := range ch.Warnings {
			if w.Code == api.WarnClusterLimitAdded {
				need = append(need, ch)
				break
			}
		}
	}
	if len(need) == 0 {
		return
	}
	ctx := c.Request.Context()
	var nodes []*sluice.Node
	nodesErr := ""
	if s.s.Nodes == nil {
		nodesErr = "the node registry (etcd) is not configured"
	} else if found, err := s.s.Nodes.FindNodes(ctx, sluice.NodeFilter{Namespace: ns}); err != nil {
		nodesErr = sluice.ErrorMessage(err)
	} else {
		nodes = found
	}
	memo := map[int64]bool{}
	clusterVersion := func(n int64) bool {
		if has, ok := memo[n]; ok {
			return has
		}
		has := false
		if v, err := s.s.Versions.FindVersion(ctx, ns, n); err == nil {
			if rs, err := sluice.DecodeDocument(v.Document); err == nil {
				has = slices.ContainsFunc(rs.Limits, func(l api.Limit) bool { return l.Scope == api.ScopeCluster })
			}
		}
		memo[n] = has
		return has
	}
	for _, ch := range need {
		if nodesErr != "" {
			ch.Warnings = append(ch.Warnings, api.Warning{Code: sluice.WarnClusterLimitWithoutRedis,
				Message: "the nodes of namespace " + ns + " could not be read (" + nodesErr + "), so whether they have Redis is unknown; a node without --redis or --redis-cluster refuses a version with a cluster limit"})
			continue
		}
		if w := sluice.RedisWarning(ns, ch.Warnings, nodes, clusterVersion); w != nil {
			ch.Warnings = append(ch.Warnings, *w)
		}
	}
}

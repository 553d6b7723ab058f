package http

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/sluicegw/sluice/api"
	sluice "github.com/sluicegw/sluice/controlplane"
)

func (s *Server) previewService() (sluice.PreviewService, error) {
	if s.s.Previews == nil {
		return nil, sluice.Errorf(sluice.EUNAVAILABLE, "previews are not configured (they need etcd)")
	}
	return s.s.Previews, nil
}

// endPreview stops change's preview, if the namespace runs one, after a
// request ended or edited the change (why: published, rejected, edited).
// The request has succeeded either way: a failure is logged, and the
// control plane's sweep (etcd.PreviewService.SweepPreviews) stops a
// published or rejected change's preview within seconds.
func (s *Server) endPreview(c *gin.Context, ns string, change int64, why string) {
	if s.s.Previews == nil {
		return
	}
	if _, err := s.s.Previews.EndPreview(c.Request.Context(), ns, change, why); err != nil {
		s.s.Logger.Warn("stopping the preview of an ended change", "namespace", ns, "change", change, "reason", why, "err", err)
	}
}

// previewRequest is POST …/changes/{id}/preview's body.
type previewRequest struct {
	Duration string            `json:"duration"`
	Selector map[string]string `json:"selector"`
}

func (s *Server) startPreview(c *gin.Context) error {
	ns, id, err := nsNumber(c, "id")
	if err != nil {
		return err
	}
	var req previewRequest
	if err := s.bindJSON(c, &req, false); err != nil {
		return err
	}
	d, err := time.ParseDuration(req.Duration)
	if err != nil {
		return &sluice.Error{Code: sluice.EINVALID, Message: "invalid preview",
			Fields: api.Errors{{Path: "duration", Message: "must be a duration such as 5m or 30m"}}}
	}
	previews, err := s.previewService()
	if err != nil {
		return err
	}
	p, err := previews.StartPreview(c.Request.Context(), ns, id, sluice.PreviewSpec{Duration: d, Selector: req.Selector})
	return reply(c, http.StatusOK, p, err)
}

func (s *Server) getPreview(c *gin.Context) error {
	ns, id, err := nsNumber(c, "id")
	if err != nil {
		return err
	}
	previews, err := s.previewService()
	if err != nil {
		return err
	}
	p, err := previews.FindPreview(c.Request.Context(), ns, id)
	return reply(c, http.StatusOK, p, err)
}

func (s *Server) stopPreview(c *gin.Context) error {
	ns, id, err := nsNumber(c, "id")
	if err != nil {
		return err
	}
	previews, err := s.previewService()
	if err != nil {
		return err
	}
	if err := previews.StopPreview(c.Request.Context(), ns, id); err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}

package degrade

// FallbackStatus is the status a shed request is answered with (the plan's
// fallback's, 503 by default): what the in-service SDK reports in its
// refusal.
func (c *Controller) FallbackStatus() int { return c.fb.status }

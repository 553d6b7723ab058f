package breaker

// FallbackStatus is the status an open breaker answers with (its fallback's,
// 503 by default): what the in-service SDK reports in its refusal.
func (b *Breaker) FallbackStatus() int { return b.cfg.status }

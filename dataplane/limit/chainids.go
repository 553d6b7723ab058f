package limit

// IDs returns the ids of the chain's limits in evaluation order (nil for a
// nil Chain): what a route or an SDK resource is limited by.
func (c *Chain) IDs() []string {
	if c == nil {
		return nil
	}
	ids := make([]string, len(c.rules))
	for i, ru := range c.rules {
		ids[i] = ru.l.ID
	}
	return ids
}

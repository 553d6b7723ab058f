package degrade

import (
	"math"
	"slices"

	"github.com/sluicegw/sluice/dataplane/reqview"
)

// # Shedding by class (shedOrder)
//
// A rule with a shedOrder (api.Degrade.ShedOrder) spends level 1's share of
// the traffic on the classes it lists first, in order, before any other
// class. The controller counts each window's arrivals per class; at the end
// of a window it plans the next one: the share to shed is level1ShedRatio of
// the window's arrivals; the first listed class is shed whole if the share
// covers it, then the next, and the first class the share does not cover is
// shed in part (that fraction of its clients, chosen by the same consistent
// client hash as without classes); classes after it, and classes not listed,
// are not shed. If the listed classes together are less than the share, the
// rest of it is taken from the other classes' clients alike. Until the first
// window has been measured, every class is shed at level1ShedRatio as
// without a shedOrder. Level 2 sheds everything, whatever the class. A
// request's class is the view's (classify.Classes.Classify), where a class that
// matches headers counts only from a trusted proxy: a client cannot move
// itself later in the order by sending a header.

// shedPlan is a rule's class ordering: rank[class index] is the class's
// position in shedOrder, or len(order) (the "others" slot) for a class not
// listed.
type shedPlan struct {
	rank  []int
	slots int // len(shedOrder) + 1
}

// newShedPlan maps shedOrder (class ids) onto the class indexes of classes
// (ids by index; index 0 is "default").
func newShedPlan(order, classes []string) *shedPlan {
	if len(order) == 0 {
		return nil
	}
	p := &shedPlan{slots: len(order) + 1, rank: make([]int, max(len(classes), 1))}
	for i := range p.rank {
		p.rank[i] = len(order)
	}
	for pos, id := range order {
		if i := slices.Index(classes, id); i >= 0 {
			p.rank[i] = pos
		} else if id == "default" {
			p.rank[0] = pos
		}
	}
	return p
}

// slot returns the plan slot of class index class.
func (p *shedPlan) slot(class int) int {
	if class < 0 || class >= len(p.rank) {
		return p.slots - 1
	}
	return p.rank[class]
}

// AdmitClass is Admit for a request of class index class (0 is the default
// class; indexes follow Options.Classes). A rule without a shedOrder ignores
// the class.
func (c *Controller) AdmitClass(clientKey uint64, class int, now int64) (shed bool, level int) {
	return c.admitClass(clientKey, class, now, nil)
}

// admitClass is AdmitClass, logging a shed as a decision line naming v when
// v is not nil.
func (c *Controller) admitClass(clientKey uint64, class int, now int64, v *reqview.View) (shed bool, level int) {
	if c == nil {
		return false, 0
	}
	if c.plan == nil {
		return c.admit(clientKey, now, v)
	}
	if w := now / c.windowNs; w > c.win.Load() {
		c.roll(w, now)
	}
	c.arrivals.Add(1)
	slot := c.plan.slot(class)
	c.classArrivals[slot].Add(1)
	level = c.Level(now)
	switch level {
	case 0:
		return false, 0
	case 1:
		if mix(clientKey^c.seed)>>11 >= c.classShedBelow[slot].Load() {
			return false, 1
		}
	}
	c.onShed(now, level, v)
	return true, level
}

// replan computes the next window's per-class shed thresholds from the
// window just closed. c.mu is held.
func (c *Controller) replan() {
	if c.plan == nil {
		return
	}
	counts := make([]float64, c.plan.slots)
	total := 0.0
	for i := range counts {
		counts[i] = float64(c.classArrivals[i].Swap(0))
		total += counts[i]
	}
	if total == 0 {
		return // nothing measured: keep the last plan
	}
	ratio := float64(c.shedBelow) / (1 << 53)
	left := ratio * total
	for i, n := range counts {
		var f float64
		switch {
		case i == len(counts)-1: // the classes not listed: whatever is left, alike
			if n > 0 {
				f = min(1, left/n)
			}
		case left >= n:
			f = 1
		case n > 0:
			f = left / n
		}
		left = math.Max(0, left-f*n)
		c.classShedBelow[i].Store(uint64(f * (1 << 53)))
	}
}

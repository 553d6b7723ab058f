// Package carry is the one lifecycle of state that outlives a reload: the
// limiters, breakers and degrade controllers a compiled set hands over to the
// next one (Caddy's Provision/Cleanup and usage pool are the model).
//
// Each set keeps its items in a Gen, keyed by rule id. Compiling the next set
// opens a Build on the set in service: Provide returns the previous item of
// the same id and fingerprint as it is (carried, state and all), or a new one
// (provisioned, optionally from the previous item of that id, as a limit
// carries its fill over). A compile that fails calls Discard, which retires
// every item it provisioned and leaves the previous generation as it was;
// one that succeeds calls Done. Once the next set is in service, Retire on
// the old generation retires exactly the items the next one did not carry.
//
// The idiom is
//
//	b := carry.Begin(prev.gen, retire)
//	defer b.Discard() // after Done, a no-op
//	for each rule { v, carried, err := b.Provide(id, fingerprint, build) ... }
//	s.gen = b.Done()
package carry

import "fmt"

// Retire releases what one item holds (closes a cluster limiter, stops a
// breaker from writing its gauge). named reports whether the generation that
// survives (the next one in Gen.Retire, the previous one in Build.Discard)
// still has a rule of this id, under another fingerprint: per-id state such
// as a metric series or an override stays then.
type Retire[T comparable] func(id string, v T, named bool)

type entry[T comparable] struct {
	fp string
	v  T
}

// Gen is one generation of items, keyed by rule id. A nil *Gen holds none.
// It is immutable once built and safe for concurrent reads.
type Gen[T comparable] struct {
	byID map[string]entry[T]
	ids  []string // in Provide order
}

// Len returns the number of items.
func (g *Gen[T]) Len() int {
	if g == nil {
		return 0
	}
	return len(g.ids)
}

// Get returns the item of id and whether there is one.
func (g *Gen[T]) Get(id string) (T, bool) {
	if g == nil {
		var zero T
		return zero, false
	}
	e, ok := g.byID[id]
	return e.v, ok
}

// Retire retires the items of g that next does not hold (the same item under
// the same id), as retire says; next may be nil (shutdown: every item). Call
// it once, after next is in service.
func (g *Gen[T]) Retire(next *Gen[T], retire Retire[T]) {
	if g == nil {
		return
	}
	for _, id := range g.ids {
		e := g.byID[id]
		n, named := next.Get(id)
		if named && n == e.v {
			continue
		}
		retire(id, e.v, named)
	}
}

// Build assembles the next generation from the one in service. It is not
// safe for concurrent use.
type Build[T comparable] struct {
	prev   *Gen[T]
	next   *Gen[T]
	retire Retire[T]
	fresh  []string // ids whose item this build provisioned
	done   bool
}

// Begin starts building the generation after prev (nil: the first one).
// retire is what Discard does with each item provisioned.
func Begin[T comparable](prev *Gen[T], retire Retire[T]) *Build[T] {
	return &Build[T]{prev: prev, next: &Gen[T]{byID: map[string]entry[T]{}}, retire: retire}
}

// Provide returns the item of rule id with fingerprint fp: the previous
// generation's item when it has the same id and fingerprint (carried true),
// else the one build returns, given the previous item of that id, if any
// (old, had), to take state from. An id already provided in this build, or an
// error from build, fails Provide; the caller then returns, and its deferred
// Discard retires what this build provisioned.
func (b *Build[T]) Provide(id, fp string, build func(old T, had bool) (T, error)) (v T, carried bool, err error) {
	if _, dup := b.next.byID[id]; dup {
		return v, false, &DuplicateError{ID: id}
	}
	if e, ok := b.prev.entry(id); ok && e.fp == fp {
		b.add(id, e)
		return e.v, true, nil
	}
	old, had := b.prev.Get(id)
	if v, err = build(old, had); err != nil {
		return v, false, err
	}
	b.add(id, entry[T]{fp: fp, v: v})
	b.fresh = append(b.fresh, id)
	return v, false, nil
}

func (g *Gen[T]) entry(id string) (entry[T], bool) {
	if g == nil {
		return entry[T]{}, false
	}
	e, ok := g.byID[id]
	return e, ok
}

func (b *Build[T]) add(id string, e entry[T]) {
	b.next.byID[id] = e
	b.next.ids = append(b.next.ids, id)
}

// Done returns the generation built. Discard does nothing after Done.
func (b *Build[T]) Done() *Gen[T] {
	b.done = true
	return b.next
}

// Discard retires every item this build provisioned (carried ones belong to
// the previous generation, which keeps them), unless Done was called. It is
// idempotent.
func (b *Build[T]) Discard() {
	if b.done {
		return
	}
	b.done = true
	for _, id := range b.fresh {
		_, named := b.prev.Get(id)
		b.retire(id, b.next.byID[id].v, named)
	}
}

// DuplicateError is Provide's error for an id provided twice in one build.
type DuplicateError struct{ ID string }

func (e *DuplicateError) Error() string { return fmt.Sprintf("duplicate id %q", e.ID) }

package carry

import (
	"errors"
	"slices"
	"testing"
)

type item struct {
	id   string
	from *item // the previous item it was built from
}

type log struct{ retired []string }

func (l *log) retire(id string, v *item, named bool) {
	s := id
	if named {
		s += "(named)"
	}
	l.retired = append(l.retired, s)
}

func build(id string) func(*item, bool) (*item, error) {
	return func(old *item, had bool) (*item, error) {
		if !had {
			old = nil
		}
		return &item{id: id, from: old}, nil
	}
}

func gen(tb testing.TB, prev *Gen[*item], l *log, rules ...[2]string) *Gen[*item] {
	tb.Helper()
	b := Begin(prev, l.retire)
	defer b.Discard()
	for _, r := range rules {
		if _, _, err := b.Provide(r[0], r[1], build(r[0])); err != nil {
			tb.Fatal(err)
		}
	}
	return b.Done()
}

func TestProvideAndRetire(t *testing.T) {
	t.Parallel()
	l := &log{}
	g1 := gen(t, nil, l, [2]string{"a", "1"}, [2]string{"b", "1"}, [2]string{"c", "1"})
	a1, _ := g1.Get("a")
	b1, _ := g1.Get("b")
	// a unchanged, b changed, c removed, d new.
	g2 := gen(t, g1, l, [2]string{"a", "1"}, [2]string{"b", "2"}, [2]string{"d", "1"})
	if len(l.retired) != 0 {
		t.Fatalf("building retired %q", l.retired)
	}
	if a2, _ := g2.Get("a"); a2 != a1 {
		t.Fatal("unchanged item not carried")
	}
	if b2, _ := g2.Get("b"); b2 == b1 || b2.from != b1 {
		t.Fatal("changed item not rebuilt from its namesake")
	}
	if d, _ := g2.Get("d"); d.from != nil {
		t.Fatal("new item built from something")
	}
	g1.Retire(g2, l.retire)
	if want := []string{"b(named)", "c"}; !slices.Equal(l.retired, want) {
		t.Fatalf("retired %q, want %q", l.retired, want)
	}
	l.retired = nil
	g2.Retire(nil, l.retire)
	if want := []string{"a", "b", "d"}; !slices.Equal(l.retired, want) {
		t.Fatalf("shutdown retired %q, want %q", l.retired, want)
	}
	if g2.Len() != 3 || (*Gen[*item])(nil).Len() != 0 {
		t.Fatal("Len")
	}
}

func TestDiscard(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc string
		fail func(b *Build[*item]) error
		want []string
	}{
		{"build error", func(b *Build[*item]) error {
			_, _, err := b.Provide("e", "1", func(*item, bool) (*item, error) { return nil, errors.New("boom") })
			return err
		}, []string{"b(named)", "d"}},
		{"duplicate id", func(b *Build[*item]) error {
			_, _, err := b.Provide("d", "1", build("d"))
			var dup *DuplicateError
			if !errors.As(err, &dup) || dup.ID != "d" {
				t.Errorf("err = %v, want a DuplicateError", err)
			}
			return err
		}, []string{"b(named)", "d"}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			l := &log{}
			g1 := gen(t, nil, l, [2]string{"a", "1"}, [2]string{"b", "1"})
			b := Begin(g1, l.retire)
			for _, r := range [][2]string{{"a", "1"}, {"b", "2"}, {"d", "1"}} {
				if _, _, err := b.Provide(r[0], r[1], build(r[0])); err != nil {
					t.Fatal(err)
				}
			}
			if tc.fail(b) == nil {
				t.Fatal("no error")
			}
			b.Discard()
			b.Discard()
			if !slices.Equal(l.retired, tc.want) {
				t.Fatalf("discard retired %q, want %q (carried items stay with the previous generation)", l.retired, tc.want)
			}
			if a, ok := g1.Get("a"); !ok || a.id != "a" {
				t.Fatal("previous generation changed")
			}
		})
	}
}

func TestDoneThenDiscard(t *testing.T) {
	t.Parallel()
	l := &log{}
	b := Begin(nil, l.retire)
	if _, carried, err := b.Provide("a", "1", build("a")); err != nil || carried {
		t.Fatal(err, carried)
	}
	g := b.Done()
	b.Discard()
	if len(l.retired) != 0 || g.Len() != 1 {
		t.Fatalf("Discard after Done retired %q", l.retired)
	}
}

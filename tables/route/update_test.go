package route

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/gswitch/gswitch/tables/lpm"
)

// TestUpdateBatches applies random batches of adds, replacements and
// deletes (a prefix may be added and deleted in one batch) with Update and
// checks the table and an OnChange mirror against a reference; it counts
// one publication per batch that changed something.
func TestUpdateBatches(t *testing.T) {
	for _, c := range []struct {
		name string
		opts Options
	}{
		{"default", Options{}},
		{"rebuilds", Options{LPM4: lpm.Options{HeadRoom: -1, MinFree: -1}, LPM6: lpm.Options{HeadRoom: -1, MinFree: -1}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rng := newRand(3)
			var m mirror
			opts := c.opts
			opts.OnChange = m.apply(t)
			tb, err := New(9, opts)
			mustOK(t, err)
			ref := newReference()
			var addrs []netip.Addr
			for range 400 {
				addrs = append(addrs, randomAddr(rng, true), randomAddr(rng, false))
			}
			for step := range 40 {
				var batch []Change
				next := newReference()
				for p, r := range ref.routes {
					next.routes[p] = r
				}
				for range 1 + rng.IntN(60) {
					r := randomRoute(rng, tb.ID(), rng.IntN(2) == 0)
					if _, ok := next.routes[r.Prefix]; ok && rng.IntN(2) == 0 {
						batch = append(batch, Change{Route: Route{Prefix: r.Prefix}, Delete: true})
						delete(next.routes, r.Prefix)
						continue
					}
					batch = append(batch, Change{Route: r})
					next.routes[r.Prefix] = r
				}
				before := tb.Stats().Publications
				mustOK(t, tb.Update(batch))
				*ref = *next
				if got := tb.Stats().Publications - before; got > 1 {
					t.Fatalf("step %d: %d publications for one batch", step, got)
				}
				checkTable(t, tb, ref, &m, addrs)
			}
		})
	}
}

// TestUpdateAllOrNothing: a batch with a bad step (an invalid route, a
// delete of a prefix not installed, one deleted twice) changes nothing, and
// the error names the step.
func TestUpdateAllOrNothing(t *testing.T) {
	rng := newRand(4)
	var m mirror
	tb, err := New(5, Options{OnChange: m.apply(t)})
	mustOK(t, err)
	ref := newReference()
	for range 200 {
		r := randomRoute(rng, tb.ID(), rng.IntN(2) == 0)
		mustOK(t, tb.Add(r))
		ref.routes[r.Prefix] = r
	}
	var addrs []netip.Addr
	for range 400 {
		addrs = append(addrs, randomAddr(rng, true), randomAddr(rng, false))
	}
	installed := ref.sorted()[0]
	good := randomRoute(rng, tb.ID(), true)
	bad := good
	bad.Prefix = netip.MustParsePrefix("10.1.2.3/8") // not masked
	absent := netip.MustParsePrefix("203.0.113.0/24")
	delete(ref.routes, absent)
	for _, c := range []struct {
		name  string
		batch []Change
		want  error
	}{
		{"invalid route last", []Change{{Route: good}, {Route: Route{Prefix: installed.Prefix}, Delete: true}, {Route: bad}}, ErrInvalid},
		{"delete of an absent prefix", []Change{{Route: good}, {Route: Route{Prefix: absent}, Delete: true}}, ErrNotFound},
		{"deleted twice", []Change{{Route: Route{Prefix: installed.Prefix}, Delete: true}, {Route: Route{Prefix: installed.Prefix}, Delete: true}}, ErrNotFound},
	} {
		if err := tb.Update(c.batch); !errors.Is(err, c.want) {
			t.Fatalf("%s: Update = %v, want %v", c.name, err, c.want)
		}
		checkTable(t, tb, ref, &m, addrs)
	}
}

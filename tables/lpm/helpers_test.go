package lpm

import (
	"net/netip"
	"sync"
	"testing"

	"github.com/gswitch/gswitch/internal/shareddata"
	"github.com/gswitch/gswitch/tables/bubble"
)

var real struct {
	once   sync.Once
	v4, v6 []netip.Prefix
	err    error
	path   string
}

// realPrefixes loads the real BGP table once per process, split by family.
func realPrefixes(tb testing.TB) (v4, v6 []netip.Prefix) {
	path := shareddata.Path(tb, "fib/bgp-full-table.txt.gz")
	real.once.Do(func() {
		real.path = path
		var all []netip.Prefix
		all, real.err = OpenPrefixFile(path)
		real.v4, real.v6 = SplitFamilies(all)
	})
	if real.err != nil {
		tb.Fatalf("the real BGP table %s is needed (shared data set of the project): %v", real.path, real.err)
	}
	return real.v4, real.v6
}

// syntheticRoutes gives every prefix its SyntheticNextHop.
func syntheticRoutes(ps []netip.Prefix) []Route {
	rs := make([]Route, len(ps))
	for i, p := range ps {
		rs[i] = Route{Prefix: p, NextHop: SyntheticNextHop(p)}
	}
	return rs
}

// mirrorState is a backend's copy of a table's image kept only through Sync.
type mirrorState struct {
	img *bubble.Image
}

// sync applies the table's pending update and checks the copy equals the
// table's image and that a View over it answers like the table on addrs.
func (ms *mirrorState) sync(tb testing.TB, t *Table, addrs []netip.Addr) {
	tb.Helper()
	u := t.Mirror().Sync()
	if err := u.ApplyTo(&ms.img); err != nil {
		tb.Fatalf("apply update: %v", err)
	}
	if d := ms.img.Diff(t.Mirror().Image()); d != "" {
		tb.Fatalf("mirror differs from the table's image: %s", d)
	}
	v, err := NewView(ms.img)
	if err != nil {
		tb.Fatalf("view of the mirror: %v", err)
	}
	for _, a := range addrs {
		want, _ := t.Lookup(a)
		if got := viewLookup(v, a); got != want {
			tb.Fatalf("mirror view: %v -> %d, table says %d", a, got, want)
		}
	}
}

// viewLookup looks a up through v.
func viewLookup(v *View, a netip.Addr) uint32 {
	hi, lo := addrBits(a)
	if a.Is4() {
		return v.Lookup4(uint32(hi >> 32))
	}
	return v.Lookup6(hi, lo)
}

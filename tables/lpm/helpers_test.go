package lpm

import (
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/gswitch/gswitch/tables/bubble"
)

// realTablePath returns ../shared/data/fib/bgp-full-table.txt.gz relative to
// the repository root (found by walking up to go.mod).
func realTablePath(tb testing.TB) string {
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatalf("no go.mod above the test's directory")
		}
		dir = parent
	}
	return filepath.Join(dir, "..", "shared", "data", "fib", "bgp-full-table.txt.gz")
}

var real struct {
	once   sync.Once
	v4, v6 []netip.Prefix
	err    error
	path   string
}

// realPrefixes loads the real BGP table once per process, split by family.
func realPrefixes(tb testing.TB) (v4, v6 []netip.Prefix) {
	path := realTablePath(tb)
	real.once.Do(func() {
		real.path = path
		if _, err := os.Stat(path); err != nil {
			real.err = err
			return
		}
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

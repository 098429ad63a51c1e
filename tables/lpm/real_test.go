package lpm

import (
	"net/netip"
	"testing"
)

// TestRealTable builds both families of the real BGP table, checks random and
// in-table lookups against the reference, applies a stretch of the update
// trace and checks again, and follows it all with a mirror fed by Sync.
func TestRealTable(t *testing.T) {
	v4, v6 := realPrefixes(t)
	if len(v4) < 800000 || len(v6) < 100000 {
		t.Fatalf("the real table looks truncated: %d IPv4 and %d IPv6 prefixes", len(v4), len(v6))
	}
	for _, c := range []struct {
		fam Family
		ps  []netip.Prefix
	}{{IPv4, v4}, {IPv6, v6}} {
		t.Run(c.fam.String(), func(t *testing.T) { checkRealTable(t, c.fam, c.ps) })
	}
}

func checkRealTable(t *testing.T, fam Family, ps []netip.Prefix) {
	routes := syntheticRoutes(ps)
	tb, err := Build(fam, routes, Options{})
	mustOK(t, err)
	ref := NewReference(fam)
	for _, r := range routes {
		mustOK(t, ref.Insert(r.Prefix, r.NextHop))
	}
	t.Logf("%v: %d prefixes, strides %v, %.1f bytes/prefix", fam, tb.Len(), tb.Strides(), tb.Stats().BytesPerPrefix)
	addrs := append(RandomAddrs(fam, 100000, 11), TableAddrs(ps, 100000, 12)...)
	compareReal(t, tb, ref, addrs)

	var ms mirrorState
	ms.sync(t, tb, addrs[:1000])
	trace := UpdateTrace(ps, 50000, 13)
	for i, u := range trace {
		applyBoth(t, tb, ref, u)
		if i%10000 == 9999 {
			ms.sync(t, tb, addrs[:1000])
		}
	}
	// Addresses inside the changed prefixes are the interesting ones now.
	var changed []netip.Prefix
	for _, u := range trace {
		changed = append(changed, u.Prefix)
	}
	compareReal(t, tb, ref, append(addrs, TableAddrs(changed, 50000, 14)...))
	ms.sync(t, tb, addrs[:1000])
	if err := checkCounts(tb); err != nil {
		t.Fatal(err)
	}
	s := tb.Stats()
	t.Logf("%v after %d updates: %d prefixes, garbage %v, rebuilds %d", fam, len(trace), s.Prefixes, s.GarbagePerLevel, s.Rebuilds)
}

func applyBoth(t *testing.T, tb *Table, ref *Reference, u Update) {
	t.Helper()
	if u.Withdraw {
		mustOK(t, tb.Delete(u.Prefix))
		mustOK(t, ref.Delete(u.Prefix))
		return
	}
	mustOK(t, tb.Insert(u.Prefix, u.NextHop))
	mustOK(t, ref.Insert(u.Prefix, u.NextHop))
}

func compareReal(t *testing.T, tb *Table, ref *Reference, addrs []netip.Addr) {
	t.Helper()
	if tb.Len() != ref.Len() {
		t.Fatalf("Len %d, reference %d", tb.Len(), ref.Len())
	}
	for _, a := range addrs {
		got, _ := tb.Lookup(a)
		if want, _ := ref.Lookup(a); got != want {
			t.Fatalf("%v: got %d, want %d", a, got, want)
		}
	}
	checkBatch(t, tb, addrs[:10000])
}

package route

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/gswitch/gswitch/tables/bubble"
	"github.com/gswitch/gswitch/tables/lpm"
)

// reference is a brute-force routing table: a map of routes, looked up by
// trying every prefix length from the longest down.
type reference struct {
	routes map[netip.Prefix]Route
}

func newReference() *reference { return &reference{routes: make(map[netip.Prefix]Route)} }

func (r *reference) lookup(a netip.Addr) (Route, bool) {
	for l := a.BitLen(); l >= 0; l-- {
		p, _ := a.Prefix(l)
		if rt, ok := r.routes[p]; ok {
			return rt, true
		}
	}
	return Route{}, false
}

func (r *reference) sorted() []Route {
	out := make([]Route, 0, len(r.routes))
	for _, rt := range r.routes {
		out = append(out, rt)
	}
	slices.SortFunc(out, func(a, b Route) int { return comparePrefix(a.Prefix, b.Prefix) })
	return out
}

// mirror is a consumer that keeps copies of both images only from the
// updates OnChange hands it, as the GPU engine does.
type mirror struct {
	im [2]*bubble.Image
}

func (m *mirror) apply(t testing.TB) func(fam lpm.Family, u bubble.Update) {
	return func(fam lpm.Family, u bubble.Update) {
		i := 0
		if fam == lpm.IPv6 {
			i = 1
		}
		if err := u.ApplyTo(&m.im[i]); err != nil {
			t.Errorf("mirror of %v: %v", fam, err)
		}
	}
}

// views returns views of both mirrored images (nil where none was given).
func (m *mirror) views(t testing.TB) [2]*lpm.View {
	t.Helper()
	var vs [2]*lpm.View
	for i, im := range m.im {
		if im == nil {
			continue
		}
		v, err := lpm.NewView(im)
		if err != nil {
			t.Fatalf("mirror image: %v", err)
		}
		vs[i] = v
	}
	return vs
}

// checkTable compares the table (CPU lookups, Routes, Len, and the mirror
// when given) with the reference on addrs.
func checkTable(t *testing.T, tb *Table, ref *reference, m *mirror, addrs []netip.Addr) {
	t.Helper()
	if tb.Len() != len(ref.routes) {
		t.Fatalf("Len %d, reference %d", tb.Len(), len(ref.routes))
	}
	got, want := tb.Routes(), ref.sorted()
	if !slices.EqualFunc(got, want, Route.Equal) {
		t.Fatalf("Routes differ from the reference: %d vs %d routes", len(got), len(want))
	}
	var vs [2]*lpm.View
	if m != nil {
		vs = m.views(t)
	}
	for _, a := range addrs {
		wr, wok := ref.lookup(a)
		e, ok := tb.Lookup(a)
		if ok != wok || ok && !e.Route.Equal(wr) {
			t.Fatalf("Lookup(%v) = %v %v, reference %v %v", a, e, ok, wr, wok)
		}
		if m == nil {
			continue
		}
		var leaf uint32
		if v := vs[famIndex(a)]; v != nil {
			leaf = v.LookupAddr(a)
		}
		me := tb.Entry(leaf)
		if (me != nil) != wok || wok && !me.Route.Equal(wr) {
			t.Fatalf("mirror lookup of %v = %v, reference %v %v", a, me, wr, wok)
		}
	}
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 77)) }

// randomPrefix draws a clustered prefix: addresses from a few /8s (IPv4) or
// /24s (IPv6) so that prefixes nest, lengths over the whole range.
func randomPrefix(rng *rand.Rand, v4 bool) netip.Prefix {
	if v4 {
		b := [4]byte{byte(10 + rng.IntN(3)), byte(rng.IntN(4)), byte(rng.IntN(256)), byte(rng.IntN(256))}
		p, _ := netip.AddrFrom4(b).Prefix(rng.IntN(33))
		return p
	}
	var b [16]byte
	b[0], b[1], b[2] = 0x20, 0x01, byte(rng.IntN(3))
	for i := 3; i < 16; i++ {
		b[i] = byte(rng.IntN(4))
	}
	p, _ := netip.AddrFrom16(b).Prefix(rng.IntN(129))
	return p
}

// randomAddr draws an address inside the clusters of randomPrefix.
func randomAddr(rng *rand.Rand, v4 bool) netip.Addr {
	p := randomPrefix(rng, v4)
	a := p.Addr()
	if v4 {
		b := a.As4()
		for i := p.Bits(); i < 32; i++ {
			if rng.IntN(2) == 1 {
				b[i/8] |= 0x80 >> (i % 8)
			}
		}
		return netip.AddrFrom4(b)
	}
	b := a.As16()
	for i := p.Bits(); i < 128; i++ {
		if rng.IntN(2) == 1 {
			b[i/8] |= 0x80 >> (i % 8)
		}
	}
	return netip.AddrFrom16(b)
}

// randomRoute draws a valid route for table id on ports 1..8.
func randomRoute(rng *rand.Rand, id uint32, v4 bool) Route {
	r := Route{Table: id, Prefix: randomPrefix(rng, v4), Source: Sources[rng.IntN(len(Sources))], Metric: uint32(rng.IntN(3))}
	n := 1 + rng.IntN(3)
	for i := range n {
		h := NextHop{Port: uint32(1 + rng.IntN(8)), Weight: uint32(1 + rng.IntN(4))}
		if rng.IntN(4) != 0 {
			if v4 {
				h.Gateway = netip.AddrFrom4([4]byte{192, 168, byte(i), byte(1 + rng.IntN(200))})
			} else {
				h.Gateway = netip.AddrFrom16([16]byte{0xfe, 0x80, 15: byte(1 + rng.IntN(200))})
			}
		}
		if !slices.ContainsFunc(r.NextHops, func(o NextHop) bool { return o.Gateway == h.Gateway && o.Port == h.Port }) {
			r.NextHops = append(r.NextHops, h)
		}
	}
	return r
}

func mustOK(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

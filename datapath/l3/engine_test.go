package l3

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/route"
)

// TestLookupsOnEngine checks the router's batch lookups (through the
// engine, with a min-batch of 1 so that a GPU, where one opens in a cuda
// build, serves every batch) against the table's CPU lookups, with routes
// added and deleted between batches so that the bubbles must reach the
// engine's copy.
func TestLookupsOnEngine(t *testing.T) {
	eng, err := gpu.Open("auto", nil, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	t.Logf("engine: %s", eng.Device())
	r, err := New(Config{Engine: eng, Ports: []PortConfig{
		{No: 1, MAC: mac1, Table: 7, Addrs: []netip.Prefix{netip.MustParsePrefix("10.0.1.1/24"), netip.MustParsePrefix("2001:db8:1::1/64")}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	tab, err := route.New(7, route.Options{PortOK: r.Owns})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.AttachTable(tab); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	randPrefix := func(v6 bool) netip.Prefix {
		if v6 {
			var b [16]byte
			binary.BigEndian.PutUint64(b[:], 0x20010db8_00000000|rng.Uint64()&0xffff_ffff)
			return netip.PrefixFrom(netip.AddrFrom16(b), 32+rng.IntN(33)).Masked()
		}
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], rng.Uint32())
		return netip.PrefixFrom(netip.AddrFrom4(b), 8+rng.IntN(25)).Masked()
	}
	var installed []netip.Prefix
	rt := r.tables[7]
	b := &batch{}
	for round := range 20 {
		for range 200 {
			p := randPrefix(rng.IntN(2) == 1)
			if err := tab.Add(route.Route{Table: 7, Prefix: p, Source: route.SourceStatic, NextHops: []route.NextHop{{Port: 1, Weight: 1}}}); err != nil {
				t.Fatal(err)
			}
			installed = append(installed, p)
		}
		for range 50 {
			i := rng.IntN(len(installed))
			_ = tab.Delete(installed[i]) // a repeated prefix may be gone already
			installed[i] = installed[len(installed)-1]
			installed = installed[:len(installed)-1]
		}
		b.v4, b.v6 = b.v4[:0], b.v6[:0]
		for _, p := range installed {
			a := p.Addr()
			if rng.IntN(3) == 0 {
				a = randPrefix(a.Is6()).Addr() // a miss, mostly
			}
			if a.Is4() {
				b.v4 = append(b.v4, item{dst: a})
			} else {
				b.v6 = append(b.v6, item{dst: a})
			}
		}
		for _, fam := range []struct {
			items  []item
			lookup func(*rtable, *batch)
		}{{b.v4, r.lookup4}, {b.v6, r.lookup6}} {
			fam.lookup(rt, b)
			for i, it := range fam.items {
				want, _ := tab.Lookup(it.dst)
				if b.entries[i] != want {
					t.Fatalf("round %d: %v: engine's entry %v, table's %v", round, it.dst, b.entries[i], want)
				}
			}
		}
	}
	if st := eng.Stats(); true {
		t.Logf("engine stats: %+v", st)
	}
}

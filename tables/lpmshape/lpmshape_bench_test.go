package lpmshape_test

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/gswitch/gswitch/tables/flow"
	"github.com/gswitch/gswitch/tables/lpm"
	"github.com/gswitch/gswitch/tables/lpmshape/shapetest"
)

// BenchmarkShapeLookup installs the full IPv4 BGP table as one flow table,
// "ip,nw_dst=P" with priority = prefix length (901,899 rules), and times
// the lookup of batches of 256 keys of random and in-table destinations
// by the Shape ("lpm": tables/lpm images looked up in memory) and by the
// flow table's own tuple search ("tuple"). Before timing, every key's rule
// is compared between the two. (datapath/pipeline's
// BenchmarkLPMShapedTable times the same through the pipeline's table
// stage and a gpu.Engine.)
func BenchmarkShapeLookup(b *testing.B) {
	v4, _ := shapetest.FibPrefixes(b)
	h := newHarness(b, 1)
	t := h.tables[0]
	start := time.Now()
	for _, p := range v4 {
		var m flow.Match
		m.SetEthType(flow.EthTypeIPv4)
		if err := m.SetIPv4Dst(binary.BigEndian.Uint32(p.Addr().AsSlice()), p.Bits()); err != nil {
			b.Fatal(err)
		}
		r := flow.Rule{Match: m, Priority: uint16(p.Bits())}
		id, _, err := t.ft.Add(r, 0)
		if err != nil {
			b.Fatal(err)
		}
		t.sh.Add(id, &r)
	}
	t.sh.Sync()
	b.Logf("installed %d rules in %v; %+v", t.ft.Len(), time.Since(start).Round(time.Millisecond), t.sh.Info())
	if !t.sh.Serves() {
		b.Fatal("the BGP table is not served by LPM")
	}
	const nkeys, batch = 1 << 16, 256
	addrs := append(lpm.RandomAddrs(lpm.IPv4, nkeys/2, 1), lpm.TableAddrs(v4, nkeys/2, 2)...)
	keys := make([]flow.Key, len(addrs))
	for i, a := range addrs {
		_ = keys[i].SetUint(flow.FieldInPort, 1)
		_ = keys[i].SetUint(flow.FieldEthType, flow.EthTypeIPv4)
		_ = keys[i].SetUint(flow.FieldIPProto, 17)
		_ = keys[i].SetUint(flow.FieldIPv4Dst, uint64(binary.BigEndian.Uint32(a.AsSlice())))
	}
	viaLPM, viaFlow := make([]flow.RuleID, nkeys), make([]flow.RuleID, nkeys)
	if err := t.sh.Lookup(keys, viaLPM); err != nil {
		b.Fatal(err)
	}
	t.ft.LookupBatch(keys, viaFlow)
	for i := range keys {
		if viaLPM[i] != viaFlow[i] {
			b.Fatalf("%v: LPM chose rule %d, the flow table %d", netip.Addr(addrs[i]), viaLPM[i], viaFlow[i])
		}
	}
	out := make([]flow.RuleID, batch)
	run := func(b *testing.B, lookup func(keys []flow.Key)) {
		b.ReportAllocs()
		off := 0
		for b.Loop() {
			lookup(keys[off : off+batch])
			off = (off + batch) % nkeys
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/key")
	}
	b.Run("lpm", func(b *testing.B) {
		run(b, func(k []flow.Key) {
			if err := t.sh.Lookup(k, out); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("tuple", func(b *testing.B) { run(b, func(k []flow.Key) { t.ft.LookupBatch(k, out) }) })
}

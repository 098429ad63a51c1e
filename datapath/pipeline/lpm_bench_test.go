package pipeline

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/flow"
	"github.com/gswitch/gswitch/tables/lpm"
	"github.com/gswitch/gswitch/tables/lpmshape/shapetest"
	"github.com/gswitch/gswitch/tables/rule"
)

// BenchmarkLPMShapedTable runs the table stage (worker.classify: keys
// gathered, then the LPM path or PackSoA and the classifier) on the full
// IPv4 BGP table installed as one OpenFlow table, "ip,nw_dst=P" with
// priority = prefix length (901,899 rules), on the CPU backend: served by
// LPM ("lpm") and by the flow classifier, tuple search ("tuple"), in the
// same run, on batches of 256 packets of random and in-table destinations.
// Before timing, every key's rule is compared between the two paths.
func BenchmarkLPMShapedTable(b *testing.B) {
	benchShaped(b, cpuEngine(b), 256)
}

// benchShaped installs the BGP table on a switch over eng and times the
// table stage on batches of each size, by LPM and by tuple search.
func benchShaped(b *testing.B, eng *gpu.Engine, batches ...int) {
	v4, _ := shapetest.FibPrefixes(b)
	sw, err := New(Config{Tables: 1, MaxFlows: 1 << 21, Algo: flow.Tuple, Classifier: eng, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	err = sw.Transact(func(apply func(*rule.FlowMod) error) error {
		for i, p := range v4 {
			var m flow.Match
			m.SetEthType(flow.EthTypeIPv4)
			if err := m.SetIPv4Dst(binary.BigEndian.Uint32(p.Addr().AsSlice()), p.Bits()); err != nil {
				return err
			}
			fm := &rule.FlowMod{Command: rule.FlowAdd, Priority: uint16(p.Bits()), Match: m,
				Instructions: applyOut(uint32(1 + i%4)), BufferID: rule.NoBuffer, OutPort: rule.PortAny, OutGroup: rule.GroupAny}
			if err := apply(fm); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	tab := sw.tables[0]
	b.Logf("installed %d rules in %v; search %s, %+v", tab.ft.Len(), time.Since(start).Round(time.Millisecond), sw.TableInfos()[0].Search, tab.lpm.Info())
	if !tab.lpm.Serves() {
		b.Fatal("the BGP table is not served by LPM")
	}

	const nkeys = 1 << 16
	addrs := append(lpm.RandomAddrs(lpm.IPv4, nkeys/2, 1), lpm.TableAddrs(v4, nkeys/2, 2)...)
	keys := make([]flow.Key, len(addrs))
	for i, a := range addrs {
		_ = keys[i].SetUint(flow.FieldInPort, 1)
		_ = keys[i].SetUint(flow.FieldEthType, flow.EthTypeIPv4)
		_ = keys[i].SetUint(flow.FieldIPProto, 17)
		_ = keys[i].SetUint(flow.FieldIPv4Dst, uint64(binary.BigEndian.Uint32(a.AsSlice())))
	}
	viaLPM, viaFlow := make([]flow.RuleID, nkeys), make([]flow.RuleID, nkeys)
	if err := tab.lpm.Lookup(keys, viaLPM); err != nil {
		b.Fatal(err)
	}
	tab.ft.LookupBatch(keys, viaFlow)
	for i := range keys {
		if viaLPM[i] != viaFlow[i] {
			b.Fatalf("%v: LPM chose rule %d, the flow table %d", netip.Addr(addrs[i]), viaLPM[i], viaFlow[i])
		}
	}

	w := newWorker(sw)
	stage := func(b *testing.B, batch int) {
		w.pkts = make([]pkt, batch)
		b.ReportAllocs()
		off := 0
		for b.Loop() {
			w.idx = w.idx[:0]
			for i := range w.pkts {
				w.pkts[i] = pkt{key: keys[off+i]}
				w.idx = append(w.idx, i)
			}
			off = (off + batch) % nkeys
			sw.mu.RLock()
			w.classify(tab)
			sw.mu.RUnlock()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/pkt")
		b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds()/1e6, "Mpps")
	}
	for _, search := range []string{"lpm", "tuple"} {
		sw.setLPMServing(search == "lpm")
		if tab.lpm.Serves() != (search == "lpm") {
			b.Fatalf("LPM serving not switched for %s", search)
		}
		for _, n := range batches {
			name := search
			if len(batches) > 1 {
				name = fmt.Sprintf("%s/batch=%d", search, n)
			}
			b.Run(name, func(b *testing.B) { stage(b, n) })
		}
	}
	sw.setLPMServing(true)
}

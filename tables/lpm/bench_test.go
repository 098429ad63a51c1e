package lpm

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"runtime"
	"sync"
	"testing"

	"github.com/gaissmai/bart"
)

// The benchmarks run gamt and github.com/gaissmai/bart (a popular Go LPM
// library, the CPU target to beat) on the same real table, the same traffic
// and in the same process. Traffic sets are benchTraffic addresses, cycled.
const benchTraffic = 1 << 18

// benchFamily is one family's data, loaded and built once per process.
type benchFamily struct {
	fam      Family
	prefixes []netip.Prefix
	routes   []Route
	gamt     *Table
	bart     *bart.Table[uint32]
	traffic  map[string][]netip.Addr // "random", "intable"
}

var bench struct {
	once sync.Once
	fams []*benchFamily
}

func benchData(b *testing.B) []*benchFamily {
	v4, v6 := realPrefixes(b)
	bench.once.Do(func() {
		for _, c := range []struct {
			fam Family
			ps  []netip.Prefix
		}{{IPv4, v4}, {IPv6, v6}} {
			f := &benchFamily{fam: c.fam, prefixes: c.ps, routes: syntheticRoutes(c.ps)}
			t, err := Build(c.fam, f.routes, Options{})
			if err != nil {
				panic(err)
			}
			f.gamt, f.bart = t, bartOf(f.routes)
			f.traffic = map[string][]netip.Addr{
				"random":  RandomAddrs(c.fam, benchTraffic, 1),
				"intable": TableAddrs(c.ps, benchTraffic, 2),
			}
			bench.fams = append(bench.fams, f)
		}
	})
	return bench.fams
}

func bartOf(routes []Route) *bart.Table[uint32] {
	bt := new(bart.Table[uint32])
	for _, r := range routes {
		bt.Insert(r.Prefix, r.NextHop)
	}
	return bt
}

func famName(f Family) string {
	if f == IPv4 {
		return "v4"
	}
	return "v6"
}

var sink uint32

// BenchmarkLookup reports ns per looked-up address.
func BenchmarkLookup(b *testing.B) {
	for _, f := range benchData(b) {
		for _, traffic := range []string{"random", "intable"} {
			addrs := f.traffic[traffic]
			name := famName(f.fam) + "/" + traffic
			b.Run(name+"/gamt", func(b *testing.B) { benchGamt(b, f.gamt, addrs) })
			b.Run(name+"/gamt-batch", func(b *testing.B) { benchGamtBatch(b, f.gamt, addrs) })
			b.Run(name+"/bart", func(b *testing.B) { benchBart(b, f.bart, addrs) })
		}
	}
}

func benchGamt(b *testing.B, t *Table, addrs []netip.Addr) {
	var s uint32
	mask := len(addrs) - 1
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		nh, _ := t.Lookup(addrs[i&mask])
		s += nh
	}
	sink = s
}

func benchBart(b *testing.B, t *bart.Table[uint32], addrs []netip.Addr) {
	var s uint32
	mask := len(addrs) - 1
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		nh, _ := t.Lookup(addrs[i&mask])
		s += nh
	}
	sink = s
}

// benchGamtBatch looks up 256-address batches of the raw address words (what
// the datapath hands over); ns/op is per address.
func benchGamtBatch(b *testing.B, t *Table, addrs []netip.Addr) {
	const batch = 256
	out := make([]uint32, batch)
	if t.Family() == IPv4 {
		words := words4(addrs)
		b.ResetTimer()
		for done := 0; done < b.N; done += batch {
			j := done % len(words)
			t.LookupBatch4(words[j:j+batch], out)
		}
	} else {
		words := words6(addrs)
		b.ResetTimer()
		for done := 0; done < b.N; done += batch {
			j := done % len(words)
			t.LookupBatch6(words[j:j+batch], out)
		}
	}
	sink = out[0]
}

func words4(addrs []netip.Addr) []uint32 {
	w := make([]uint32, len(addrs))
	for i, a := range addrs {
		b := a.As4()
		w[i] = binary.BigEndian.Uint32(b[:])
	}
	return w
}

func words6(addrs []netip.Addr) []Addr6 {
	w := make([]Addr6, len(addrs))
	for i, a := range addrs {
		w[i].Hi, w[i].Lo = addrBits(a)
	}
	return w
}

// BenchmarkBuild reports the time to build the whole table from its routes.
func BenchmarkBuild(b *testing.B) {
	for _, f := range benchData(b) {
		b.Run(famName(f.fam)+"/gamt", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if _, err := Build(f.fam, f.routes, Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(famName(f.fam)+"/bart", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				bartOf(f.routes)
			}
		})
	}
}

// BenchmarkUpdate applies b.N updates of the trace (UpdateTraceDescription)
// to a fresh copy of the table and reports updates/s; gamt's figure includes
// the bubbles, any rebuild the trace causes, and one Sync per 1024 updates.
func BenchmarkUpdate(b *testing.B) {
	for _, f := range benchData(b) {
		b.Run(famName(f.fam)+"/gamt", func(b *testing.B) {
			trace := UpdateTrace(f.prefixes, b.N, 3)
			t, err := Build(f.fam, f.routes, Options{})
			if err != nil {
				b.Fatal(err)
			}
			t.Mirror().Sync()
			b.ResetTimer()
			for i, u := range trace {
				if u.Withdraw {
					err = t.Delete(u.Prefix)
				} else {
					err = t.Insert(u.Prefix, u.NextHop)
				}
				if err != nil {
					b.Fatal(err)
				}
				if i%1024 == 1023 {
					t.Mirror().Sync()
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "updates/s")
		})
		b.Run(famName(f.fam)+"/bart", func(b *testing.B) {
			trace := UpdateTrace(f.prefixes, b.N, 3)
			bt := bartOf(f.routes)
			b.ResetTimer()
			for _, u := range trace {
				if u.Withdraw {
					bt.Delete(u.Prefix)
				} else {
					bt.Insert(u.Prefix, u.NextHop)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "updates/s")
		})
	}
}

// BenchmarkMemory reports bytes per prefix: gamt's image (what the device
// holds) and, for both, the Go heap the structure occupies (bart has no size
// report of its own, so its figure is the heap growth of building it). ns/op
// is the build time.
func BenchmarkMemory(b *testing.B) {
	for _, f := range benchData(b) {
		b.Run(famName(f.fam)+"/gamt", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				var t *Table
				heap := heapGrowth(func() {
					var err error
					if t, err = Build(f.fam, f.routes, Options{}); err != nil {
						b.Fatal(err)
					}
				})
				b.ReportMetric(t.Stats().BytesPerPrefix, "image-B/prefix")
				b.ReportMetric(float64(heap)/float64(t.Len()), "heap-B/prefix")
				runtime.KeepAlive(t)
			}
		})
		b.Run(famName(f.fam)+"/bart", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				var bt *bart.Table[uint32]
				heap := heapGrowth(func() { bt = bartOf(f.routes) })
				b.ReportMetric(float64(heap)/float64(bt.Size()), "heap-B/prefix")
				runtime.KeepAlive(bt)
			}
		})
	}
}

func heapGrowth(build func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	build()
	runtime.GC()
	runtime.ReadMemStats(&after)
	return after.HeapAlloc - min(after.HeapAlloc, before.HeapAlloc)
}

// BenchmarkStrideStudy is the study behind DefaultLevels4/6 (figures in
// doc.go): for each level count, Algorithm 3's strides on the real table, and
// per traffic set the lookup time, the image's bytes per prefix and the mean
// number of levels a lookup reads (a figure free of timing noise).
func BenchmarkStrideStudy(b *testing.B) {
	for _, f := range benchData(b) {
		lo, hi := 2, 5
		if f.fam == IPv6 {
			lo, hi = 10, 20
		}
		for levels := lo; levels <= hi; levels++ {
			t, err := Build(f.fam, f.routes, Options{Levels: levels})
			if err != nil {
				b.Logf("%v L=%d: %v", f.fam, levels, err)
				continue
			}
			b.Logf("%v L=%d strides %v: %.1f B/prefix", f.fam, levels, t.Strides(), t.Stats().BytesPerPrefix)
			for _, traffic := range []string{"random", "intable"} {
				addrs := f.traffic[traffic]
				b.Run(fmt.Sprintf("%s/L=%d/%s", famName(f.fam), levels, traffic), func(b *testing.B) {
					benchGamt(b, t, addrs)
					b.ReportMetric(t.Stats().BytesPerPrefix, "B/prefix")
					b.ReportMetric(meanLevels(t.View(), addrs), "levels/lookup")
				})
			}
		}
	}
}

// meanLevels returns the mean number of levels the lookups of addrs read.
func meanLevels(v *View, addrs []netip.Addr) float64 {
	total := 0
	for _, a := range addrs {
		hi, lo := addrBits(a)
		x := uint32(hi >> 32)
		e := v.lv[0].w[chunk(hi, lo, 0, int(v.lv[0].s))]
		total++
		for e&0xff != 0 {
			l := &v.lv[uint8(e)]
			if v.fam == IPv4 {
				e = l.w[(e>>8)<<l.s|(x<<l.off4)>>l.sh4]
			} else {
				e = l.w[(e>>8)<<l.s|l.chunk6(hi, lo)]
			}
			total++
		}
	}
	return float64(total) / float64(len(addrs))
}

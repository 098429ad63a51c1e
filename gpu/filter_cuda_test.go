//go:build cuda

package gpu

import (
	"testing"
	"time"

	"github.com/gswitch/gswitch/tables/filter"
	"github.com/gswitch/gswitch/tables/filter/filtertest"
)

// TestCUDAFilterCaptures compares the GPU's bitmaps, counts and bytes
// with EvalStages on every test capture, for each kernel (a subtest each:
// walk, walk-v1, stages, stages-noreuse): reduced packets, whole packets
// (an offset read from the packet), gpf_walk's rows staged in shared
// memory and read in device memory, the stages' values in shared and in
// device memory.
func TestCUDAFilterCaptures(t *testing.T) {
	c := newTestCUDA(t)
	defer SetFilterKernel("walk")
	for _, k := range FilterKernels {
		t.Run(k, func(t *testing.T) {
			if err := SetFilterKernel(k); err != nil {
				t.Fatal(err)
			}
			testCUDAFilterCaptures(t, c)
		})
	}
}

func testCUDAFilterCaptures(t *testing.T, c *CUDA) {
	for _, lim := range []int{0, 1024} {
		filterSmemLimit = lim
		open := func(maxRow int) func(p *filter.Program) PacketFilter {
			return func(p *filter.Program) PacketFilter {
				f, err := c.PacketFilter(p, 2, maxRow)
				if err != nil {
					t.Fatal(err)
				}
				t.Log(f.Describe())
				return f
			}
		}
		testPacketFilter(t, open(0), nil)
		testPacketFilter(t, open(1<<16), []filter.Spec{{Name: "var", Expr: "tcp[((tcp[12:1] & 0xf0) >> 2):4] = 0x47455420"}})
	}
	filterSmemLimit = 0
}

// TestCUDAFilterBench measures 100 and 1,000 filters on the Ethernet test
// captures' packets repeated: Mpps of the kernel alone (1M packets) and
// end to end (batches of 64K reduced packets over 4 streams, 8 in flight,
// counters out), against EvalStages on one CPU core; the end-to-end counts
// are checked against the CPU's.
func TestCUDAFilterBench(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the benchmark is skipped")
	}
	c := newTestCUDA(t)
	var pkts []filtertest.Packet
	for _, path := range filtertest.Captures(t) {
		if link, ps := filtertest.ReadCapture(t, path); link == filter.LinkEthernet {
			pkts = append(pkts, ps...)
		}
	}
	for _, nf := range []int{100, 1000} {
		p, err := filter.Compile(filtertest.Specs(nf), filter.LinkEthernet, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		f, err := c.PacketFilter(p, 4, 0)
		if err != nil {
			t.Fatal(err)
		}
		fill := func(b *PacketBatch, n int) {
			b.Reset()
			for k := 0; k < n; k++ {
				pk := pkts[k%len(pkts)]
				if ok, err := b.Add(pk.Data, pk.Wire); !ok || err != nil {
					t.Fatalf("add: %v %v", ok, err)
				}
			}
		}
		const kn = 1 << 20
		kb, err := f.NewBatch(kn, false)
		if err != nil {
			t.Fatal(err)
		}
		fill(kb, kn)
		if err := f.Submit(kb); err != nil {
			t.Fatal(err)
		}
		if err := f.Wait(kb); err != nil {
			t.Fatal(err)
		}
		ms, err := f.KernelTime(kb, 5)
		if err != nil {
			t.Fatal(err)
		}
		const en, nb = 64 << 10, 8
		var bs []*PacketBatch
		for i := 0; i < nb; i++ {
			b, err := f.NewBatch(en, false)
			if err != nil {
				t.Fatal(err)
			}
			defer f.FreeBatch(b)
			fill(b, en)
			bs = append(bs, b)
		}
		rounds := 8
		if nf >= 1000 {
			rounds = 2
		}
		t0 := time.Now()
		for i := 0; i < rounds*nb; i++ {
			b := bs[i%nb]
			if i >= nb {
				if err := f.Wait(b); err != nil {
					t.Fatal(err)
				}
			}
			if err := f.Submit(b); err != nil {
				t.Fatal(err)
			}
		}
		for _, b := range bs {
			if err := f.Wait(b); err != nil {
				t.Fatal(err)
			}
		}
		e2e := float64(rounds*nb*en) / time.Since(t0).Seconds() / 1e6
		cpu := NewCPUFilter(p, 0)
		cb, _ := cpu.NewBatch(en, false)
		fill(cb, en)
		t1 := time.Now()
		cpu.Submit(cb)
		cpuMpps := float64(en) / time.Since(t1).Seconds() / 1e6
		for i := range cb.Counts {
			if cb.Counts[i] != bs[0].Counts[i] {
				t.Fatalf("%d filters: filter %d: gpu count %d, cpu %d", nf, i, bs[0].Counts[i], cb.Counts[i])
			}
		}
		t.Logf("BENCH gpf %d filters (%d criteria, %d nodes), %d-byte reduced packets, on %s: %s: kernel %.1f Mpps (%d packets, %.3f ms), end to end %.1f Mpps (batches of %d, 4 streams); CPU EvalStages one core %.2f Mpps; GPU/CPU end to end %.0fx",
			nf, len(p.Criteria), len(p.Nodes), kb.Snap, c.Device(), f.Describe(), kn/ms/1e3, kn, ms, e2e, en, cpuMpps, e2e/cpuMpps)
		f.FreeBatch(kb)
		f.Close()
	}
}

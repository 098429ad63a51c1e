//go:build cuda

package gpu

import (
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/gswitch/gswitch/tables/rabin"
)

// TestCUDARabinMarkers compares the GPU's bitmaps with rabin.Marker.Bitmap
// bit for bit (testMarkers): fixed-window kernels (16, 32, 48, 64) and the
// generic one (31), payloads of many lengths, several batches in flight,
// each payload cut into the parts the batch's size picks (0) and into 1, 3
// and 64 segments.
func TestCUDARabinMarkers(t *testing.T) {
	c := newTestCUDA(t)
	for _, parts := range []int{0, 1, 3, 64} {
		testMarkers(t, func(m *rabin.Marker) Markers {
			r, err := c.RabinMarkers(m, 2)
			if err != nil {
				t.Fatal(err)
			}
			r.Parts = parts
			if parts == 0 {
				t.Logf("w=%d: %s, %d parts for 300 payloads", m.W, r.Kernel(), r.PartsFor(300))
			}
			return r
		})
	}
}

// TestCUDAMarkerPipeline: the pipeline over the GPU (several fillers
// submitting at once over 4 streams, waiting asleep or spinning) equals the
// CPU's bitmap.
func TestCUDAMarkerPipeline(t *testing.T) {
	c := newTestCUDA(t)
	for _, w := range []int{32, 31} {
		m, err := rabin.NewMarker(rabin.DefaultPol, w, 8)
		if err != nil {
			t.Fatal(err)
		}
		r, err := c.RabinMarkers(m, 4)
		if err != nil {
			t.Fatal(err)
		}
		r.BlockingWait = w == 32 // the benchmark's waits; the other spins
		testPipeline(t, r, m, PipelineConfig{Fillers: 3, BatchBytes: 256 << 10, BatchPayloads: 1 << 20})
		testPipeline(t, r, m, PipelineConfig{Fillers: 1, BatchBytes: 64 << 10, BatchPayloads: 50})
		r.Close()
	}
}

// TestCUDARabinBench measures markers over 1,460-byte payloads (window 48,
// 13 mask bits): the kernel alone (CUDA events, one batch of 128K
// payloads) and end to end (pinned batches of 16K payloads, copy-in, kernel
// and copy-out over 4 streams, 8 batches in flight), against one CPU core.
// The end-to-end bitmaps are checked against the CPU's.
func TestCUDARabinBench(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the benchmark is skipped")
	}
	c := newTestCUDA(t)
	for _, w := range []int{48, 64, 31} {
		m, err := rabin.NewMarker(rabin.DefaultPol, w, 13)
		if err != nil {
			t.Fatal(err)
		}
		r, err := c.RabinMarkers(m, 4)
		if err != nil {
			t.Fatal(err)
		}
		benchMarkers(t, c, r, m)
		r.Close()
	}
}

func benchMarkers(t *testing.T, c *CUDA, r *RabinMarkers, m *rabin.Marker) {
	const plen = 1460
	rng := rand.New(rand.NewPCG(1, 1))
	fill := func(b *MarkerBatch, n int) {
		p := make([]byte, plen)
		for k := 0; k < n; k++ {
			for j := range p {
				p[j] = byte(rng.UintN(256))
			}
			if !b.Add(p) {
				t.Fatal("batch full")
			}
		}
	}
	// Kernel only.
	const kn = 128 << 10
	kb, err := r.NewBatch(kn*1472, kn)
	if err != nil {
		t.Fatal(err)
	}
	defer r.FreeBatch(kb)
	fill(kb, kn)
	if err := r.Submit(kb); err != nil {
		t.Fatal(err)
	}
	if err := r.Wait(kb); err != nil {
		t.Fatal(err)
	}
	ms, err := r.KernelTime(kb, 20)
	if err != nil {
		t.Fatal(err)
	}
	kGbps := float64(kn*plen*8) / (ms * 1e6)
	// End to end.
	const en, nb = 16 << 10, 8
	var bs []*MarkerBatch
	for i := 0; i < nb; i++ {
		b, err := r.NewBatch(en*1472, en)
		if err != nil {
			t.Fatal(err)
		}
		defer r.FreeBatch(b)
		fill(b, en)
		bs = append(bs, b)
	}
	const rounds = 40
	run := func() time.Duration {
		t0 := time.Now()
		for i := 0; i < rounds*nb; i++ {
			b := bs[i%nb]
			if i >= nb {
				if err := r.Wait(b); err != nil {
					t.Fatal(err)
				}
			}
			if err := r.Submit(b); err != nil {
				t.Fatal(err)
			}
		}
		for _, b := range bs {
			if err := r.Wait(b); err != nil {
				t.Fatal(err)
			}
		}
		return time.Since(t0)
	}
	run() // warm-up
	var best time.Duration
	for i := 0; i < 3; i++ {
		if d := run(); best == 0 || d < best {
			best = d
		}
	}
	eGbps := float64(rounds*nb*en*plen*8) / best.Seconds() / 1e9
	for k, b := range bs {
		want := make([]uint32, rabin.BitmapWords(b.Bytes))
		if err := m.Bitmap(b.Buf[:b.Bytes], b.Offs[:b.N], b.Lens[:b.N], want); err != nil {
			t.Fatal(err)
		}
		if i := firstDiff(b.Bitmap[:len(want)], want); i >= 0 {
			t.Fatalf("end-to-end batch %d: bitmap word %d = %#x, want %#x", k, i, b.Bitmap[i], want[i])
		}
	}
	// One CPU core.
	cb := bs[0]
	want := make([]uint32, rabin.BitmapWords(cb.Bytes))
	t0 := time.Now()
	m.Bitmap(cb.Buf[:cb.Bytes], cb.Offs[:cb.N], cb.Lens[:cb.N], want)
	cGbps := float64(en*plen*8) / time.Since(t0).Seconds() / 1e9
	t.Logf("BENCH rabin markers w=%d bits=13 %s on %s: 1460-byte payloads: kernel %.0f Gbps (%d payloads, %.3f ms); end to end %.0f Gbps (batches of %d over 4 streams, %d in flight); CPU one core %.2f Gbps; GPU/CPU end to end %.0fx",
		m.W, r.Kernel(), c.Device(), kGbps, kn, ms, eGbps, en, nb, cGbps, eGbps/cGbps)
}

// TestCUDAEngineDeviceMarkers: the Engine's device markers (what the
// agent gives redundancy elimination's encoder) equal the CPU's.
func TestCUDAEngineDeviceMarkers(t *testing.T) {
	c := newTestCUDA(t)
	e := NewEngine(EngineConfig{Devices: []Backend{c}})
	testMarkers(t, func(m *rabin.Marker) Markers {
		mk, err := e.DeviceMarkers(m)
		if err != nil {
			t.Fatal(err)
		}
		if mk.Name() != "cuda" {
			t.Fatalf("device markers %q, want cuda", mk.Name())
		}
		return mk
	})
}

// mmapRegion maps n bytes of anonymous memory (outside the Go heap, as
// RegisterHost needs), unmapped at the test's end.
func mmapRegion(t *testing.T, n int) []byte {
	mem, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Munmap(mem) })
	return mem
}

// TestCUDARabinGather: batches by reference through the gather path (ViaGather: rabin_gather reading payloads
// at any byte offset out of registered, mapped host memory, then the
// markers kernel) equal the CPU's bitmaps bit for bit, the fixed-window
// kernels and the generic one, and through a MarkerPipeline; the gather
// alone is timed once (a smoke check of GatherTime).
func TestCUDARabinGather(t *testing.T) {
	c := newTestCUDA(t)
	mem := mmapRegion(t, 1<<20)
	for _, w := range []int{16, 31, 32, 48, 64} {
		for _, g16 := range []bool{false, true} {
			m, err := rabin.NewMarker(rabin.DefaultPol, w, 3)
			if err != nil {
				t.Fatal(err)
			}
			r, err := c.RabinMarkers(m, 3)
			if err != nil {
				t.Fatal(err)
			}
			r.Via, r.Gather16 = ViaGather, g16
			testRegionMarkers(t, r, m, mem)
			r.Close()
		}
	}
	m, _ := rabin.NewMarker(rabin.DefaultPol, 32, 8)
	r, err := c.RabinMarkers(m, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.Via = ViaGather
	h, err := r.RegisterHost(mem)
	if err != nil {
		t.Fatal(err)
	}
	defer r.UnregisterHost(h)
	b, err := r.NewBatch(700*1472, 700)
	if err != nil {
		t.Fatal(err)
	}
	defer r.FreeBatch(b)
	b.Region = h
	for k := 0; k < 700; k++ {
		b.AddRef(uint32(66+k*1460), 1460)
	}
	if err := r.Submit(b); err != nil {
		t.Fatal(err)
	}
	if err := r.Wait(b); err != nil {
		t.Fatal(err)
	}
	ms, err := r.GatherTime(b, 5)
	if err != nil || ms <= 0 {
		t.Fatalf("GatherTime: %v ms, %v", ms, err)
	}
	t.Logf("%s of 700 payloads of 1460 bytes out of mapped host memory: %.3f ms (%.0f Gbit/s)", r.GatherKernel(), ms, 700*1460*8/(ms*1e6))
	if _, err := r.RegisterHost(make([]byte, 24)); err == nil {
		t.Error("a region of 24 bytes accepted")
	}
}

// TestCUDARabinRegionCopy: batches by reference through the copy path
// (ViaCopy, the default: the copy engine's runs out of the region into a
// staging buffer, rabin_gather from there, the markers kernel) equal the
// CPU's bitmaps bit for bit: payloads at random offsets (runs of one
// row), and frames of a receive ring of mixed lengths (2-D runs cut by
// length, empty payloads, the last frame's payload at the region's last
// byte), several batches in flight and through a MarkerPipeline; the
// runs' copies alone are timed once (a smoke check of CopyTime).
func TestCUDARabinRegionCopy(t *testing.T) {
	c := newTestCUDA(t)
	mem := mmapRegion(t, 1<<20)
	for _, w := range []int{16, 31, 32, 64} {
		m, err := rabin.NewMarker(rabin.DefaultPol, w, 3)
		if err != nil {
			t.Fatal(err)
		}
		r, err := c.RabinMarkers(m, 3)
		if err != nil {
			t.Fatal(err)
		}
		if r.Via != ViaCopy {
			t.Fatalf("batches by reference go %v by default, want copy", r.Via)
		}
		testRegionMarkers(t, r, m, mem)
		r.Close()
	}
	m, _ := rabin.NewMarker(rabin.DefaultPol, 32, 4)
	r, err := c.RabinMarkers(m, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	const frame, frames = 2048, 512
	ring := mmapRegion(t, frame*frames)
	rng := rand.New(rand.NewPCG(3, 5))
	for i := range ring {
		ring[i] = byte(rng.UintN(256))
	}
	h, err := r.RegisterHost(ring)
	if err != nil {
		t.Fatal(err)
	}
	defer r.UnregisterHost(h)
	var srcs, lens []uint32
	var ps [][]byte
	for k := 0; k < frames; k++ {
		l := 1460
		switch {
		case k == frames-1:
			l = frame - 66 // up to the region's last byte
		case k%97 == 5:
			l = 0
		case k%13 == 7:
			l = rng.IntN(200)
		case k%5 == 1:
			l = 1000 + rng.IntN(460)
		}
		s := k*frame + 66
		srcs, lens, ps = append(srcs, uint32(s)), append(lens, uint32(l)), append(ps, ring[s:s+l])
	}
	before := r.CopyStats()
	var batches []*MarkerBatch
	var want [][]uint32
	for lo := 0; lo < frames; lo += 128 {
		b, err := r.NewBatch(128*frame, 128)
		if err != nil {
			t.Fatal(err)
		}
		defer r.FreeBatch(b)
		b.Region = h
		for k := lo; k < lo+128; k++ {
			if !b.AddRef(srcs[k], int(lens[k])) {
				t.Fatalf("frame %d did not fit", k)
			}
		}
		buf, offs, plens := rabin.Pack(nil, nil, nil, ps[lo:lo+128]...)
		wb := make([]uint32, rabin.BitmapWords(len(buf)))
		if err := m.Bitmap(buf, offs, plens, wb); err != nil {
			t.Fatal(err)
		}
		for i := range b.Bitmap {
			b.Bitmap[i] = 0xdeadbeef
		}
		if err := r.Submit(b); err != nil {
			t.Fatal(err)
		}
		batches, want = append(batches, b), append(want, wb)
	}
	for k, b := range batches {
		if err := r.Wait(b); err != nil {
			t.Fatal(err)
		}
		if i := firstDiff(b.Bitmap[:rabin.BitmapWords(b.Bytes)], want[k]); i >= 0 {
			t.Fatalf("ring frames, batch %d: bitmap word %d = %#x, want %#x", k, i, b.Bitmap[i], want[k][i])
		}
	}
	st := r.CopyStats()
	runs, payload, copied := st.Runs-before.Runs, st.PayloadBytes-before.PayloadBytes, st.CopiedBytes-before.CopiedBytes
	if runs < 4 || runs > frames/2 || copied < payload || copied > 2*payload {
		t.Fatalf("copy stats: %d runs, %d payload bytes, %d copied: want 4..%d runs, copied within 1..2x the payload", runs, payload, copied, frames/2)
	}
	t.Logf("%d frames of mixed lengths in 4 batches: %d runs, %d payload bytes, %d copied (%.1f%% more)", frames, runs, payload, copied, 100*float64(copied-payload)/float64(payload))

	// The pipeline over the ring.
	p, err := NewMarkerPipeline(r, PipelineConfig{Fillers: 2, BatchBytes: 256 << 10, BatchPayloads: 1 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	buf, offs, plens := rabin.Pack(nil, nil, nil, ps...)
	wb := make([]uint32, rabin.BitmapWords(len(buf)))
	got := make([]uint32, len(wb))
	for i := range got {
		got[i] = 0xdeadbeef
	}
	if err := m.Bitmap(buf, offs, plens, wb); err != nil {
		t.Fatal(err)
	}
	if err := p.BitmapRegion(h, srcs, lens, got); err != nil {
		t.Fatal(err)
	}
	if i := firstDiff(got, wb); i >= 0 {
		t.Fatalf("pipeline over the ring: bitmap word %d = %#x, want %#x", i, got[i], wb[i])
	}

	// The copies alone, over whole frames of 1,460 bytes: one 2-D run.
	b := batches[0]
	b.Reset()
	b.Region = h
	for k := 0; k < 128; k++ {
		b.AddRef(uint32(k*frame+66), 1460)
	}
	if err := r.Submit(b); err != nil {
		t.Fatal(err)
	}
	if err := r.Wait(b); err != nil {
		t.Fatal(err)
	}
	ms, err := r.CopyTime(b, 5)
	if err != nil || ms <= 0 {
		t.Fatalf("CopyTime: %v ms, %v", ms, err)
	}
	t.Logf("the copy engine's run of 128 payloads of 1460 bytes out of the ring: %.3f ms (%.0f Gbit/s)", ms, 128*1460*8/(ms*1e6))
	b.Region = nil
	b.Reset()
	if _, err := r.CopyTime(b, 1); err == nil {
		t.Error("CopyTime of an empty batch accepted")
	}
}

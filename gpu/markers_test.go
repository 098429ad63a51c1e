package gpu

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gswitch/gswitch/tables/rabin"
)

// markerLengths are payload lengths around every edge the kernels have: the
// window, 16-byte blocks, 32-bit bitmap words.
func markerLengths(rng *rand.Rand, n int) []int {
	ls := []int{0, 1, 15, 16, 17, 31, 32, 33, 47, 48, 49, 63, 64, 65, 95, 96, 97, 1460, 1500, 9000}
	for len(ls) < n {
		ls = append(ls, rng.IntN(3000))
	}
	rng.Shuffle(len(ls), func(i, j int) { ls[i], ls[j] = ls[j], ls[i] })
	return ls
}

// randomPayloads makes payloads of the given lengths: random bytes, some
// with repeated stretches (so that markers repeat too).
func randomPayloads(rng *rand.Rand, lens []int) [][]byte {
	ps := make([][]byte, len(lens))
	for i, n := range lens {
		p := make([]byte, n)
		for j := range p {
			p[j] = byte(rng.UintN(256))
		}
		if n > 200 && i%3 == 0 {
			copy(p[n/2:], p[:n/2])
		}
		ps[i] = p
	}
	return ps
}

// testMarkers compares mk's bitmaps with rabin.Marker.Bitmap over Pack of
// the same payloads, bit for bit, for several windows and masks, with
// several batches in flight at once.
func testMarkers(t *testing.T, open func(m *rabin.Marker) Markers) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, w := range []int{16, 31, 32, 48, 64} {
		for _, bits := range []int{3, 8, 13} {
			m, err := rabin.NewMarker(rabin.DefaultPol, w, bits)
			if err != nil {
				t.Fatal(err)
			}
			mk := open(m)
			const nb = 3
			var batches []*MarkerBatch
			var want [][]uint32
			for k := 0; k < nb; k++ {
				ps := randomPayloads(rng, markerLengths(rng, 300))
				b, err := mk.NewBatch(1<<20, 400)
				if err != nil {
					t.Fatal(err)
				}
				for _, p := range ps {
					if !b.Add(p) {
						t.Fatalf("payload of %d bytes did not fit", len(p))
					}
				}
				buf, offs, lens := rabin.Pack(nil, nil, nil, ps...)
				if !slices.Equal(offs, b.Offs[:b.N]) || !slices.Equal(lens, b.Lens[:b.N]) || b.Bytes != len(buf) {
					t.Fatalf("Add packs unlike rabin.Pack")
				}
				wb := make([]uint32, rabin.BitmapWords(len(buf)))
				if err := m.Bitmap(buf, offs, lens, wb); err != nil {
					t.Fatal(err)
				}
				for i := range b.Bitmap {
					b.Bitmap[i] = 0xdeadbeef // poison: every word must be written
				}
				if err := mk.Submit(b); err != nil {
					t.Fatal(err)
				}
				batches, want = append(batches, b), append(want, wb)
			}
			for k, b := range batches {
				if err := mk.Wait(b); err != nil {
					t.Fatal(err)
				}
				got := b.Bitmap[:rabin.BitmapWords(b.Bytes)]
				if i := firstDiff(got, want[k]); i >= 0 {
					t.Fatalf("%s: w=%d bits=%d batch %d: bitmap word %d = %#x, want %#x", mk.Name(), w, bits, k, i, got[i], want[k][i])
				}
				pos := MarkerPositions(nil, b)
				for j := 0; j < b.N; j++ {
					p := b.Buf[b.Offs[j] : b.Offs[j]+b.Lens[j]]
					if w := m.Markers(nil, p); !slices.Equal(pos[j], w) && len(pos[j])+len(w) > 0 {
						t.Fatalf("payload %d: positions %v, want %v", j, pos[j], w)
					}
				}
				mk.FreeBatch(b)
			}
			if err := mk.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func firstDiff(a, b []uint32) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

func TestCPUMarkers(t *testing.T) {
	testMarkers(t, func(m *rabin.Marker) Markers { return CPUMarkers{m} })
}

func TestMarkerBatchRejects(t *testing.T) {
	m, err := rabin.NewMarker(rabin.DefaultPol, 48, 8)
	if err != nil {
		t.Fatal(err)
	}
	mk := CPUMarkers{m}
	b, _ := mk.NewBatch(100, 2)
	if !b.Add(make([]byte, 40)) || b.Add(make([]byte, 80)) || !b.Add(make([]byte, 30)) || b.Add(nil) {
		t.Fatal("Add: wrong fit")
	}
	b.Offs[1] = 33 // unaligned
	if err := mk.Submit(b); err == nil {
		t.Error("unaligned payload accepted")
	}
	b.Offs[1] = 64
	b.Lens[1] = 40 // past Bytes (94)
	if err := mk.Submit(b); err == nil {
		t.Error("payload past the batch accepted")
	}
	b.N = 3
	if err := mk.Submit(b); err == nil {
		t.Error("N past the capacity accepted")
	}
}

// TestStreamMarkers checks that the segmented stream gives the markers of
// the whole stream taken as one payload.
func TestStreamMarkers(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 10, 63, 64, StreamSegment - 1, StreamSegment, StreamSegment + 1, 300*StreamSegment + 12345} {
		data := randomPayloads(rng, []int{n})[0]
		for _, w := range []int{1, 48, 64} {
			m, err := rabin.NewMarker(rabin.DefaultPol, w, 7)
			if err != nil {
				t.Fatal(err)
			}
			got, err := StreamMarkers(CPUMarkers{m}, w, data, nil)
			if err != nil {
				t.Fatal(err)
			}
			if want := m.Markers(nil, data); !slices.Equal(got, want) && len(got)+len(want) > 0 {
				t.Fatalf("n=%d w=%d: %d markers, want %d", n, w, len(got), len(want))
			}
		}
	}
}

// testPipeline compares a MarkerPipeline over mk with rabin.Marker.Bitmap of
// rabin.Pack of the same payloads, bit for bit, words outside every payload
// left alone: payloads of every edge length, batches small enough that the
// runs cut them many times, several fillers.
func testPipeline(t *testing.T, mk Markers, m *rabin.Marker, cfg PipelineConfig) {
	rng := rand.New(rand.NewPCG(11, uint64(cfg.Fillers)))
	ps := randomPayloads(rng, markerLengths(rng, 2000))
	p, err := NewMarkerPipeline(mk, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	buf, offs, lens := rabin.Pack(nil, nil, nil, ps...)
	want := make([]uint32, rabin.BitmapWords(len(buf)))
	got := make([]uint32, len(want))
	for i := range want {
		want[i], got[i] = 0xdeadbeef, 0xdeadbeef
	}
	if err := m.Bitmap(buf, offs, lens, want); err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 2; round++ { // the batches used again
		if err := p.Bitmap(ps, got); err != nil {
			t.Fatal(err)
		}
		if i := firstDiff(got, want); i >= 0 {
			t.Fatalf("%s pipeline %+v: bitmap word %d = %#x, want %#x", mk.Name(), cfg, i, got[i], want[i])
		}
	}
	if err := p.Bitmap(ps, got[:len(got)-1]); err == nil {
		t.Error("a short bitmap accepted")
	}
	if err := p.Bitmap([][]byte{make([]byte, cfg.BatchBytes+1)}, got); err == nil {
		t.Error("a payload larger than a batch accepted")
	}
}

func TestMarkerPipelineCPU(t *testing.T) {
	m, err := rabin.NewMarker(rabin.DefaultPol, 32, 8)
	if err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []PipelineConfig{{Fillers: 1, BatchBytes: 64 << 10, BatchPayloads: 1 << 20},
		{Fillers: 3, BatchBytes: 512 << 10, BatchPayloads: 1 << 20}, {Fillers: 3, BatchBytes: 512 << 10, BatchPayloads: 1 << 20, FlatStart: true},
		{Fillers: 2, BatchBytes: 256 << 10, BatchPayloads: 1 << 20, FlatStart: true, RampDown: true},
		{Fillers: 4, BatchBytes: 1 << 20, BatchPayloads: 7}} {
		testPipeline(t, CPUMarkers{m}, m, cfg)
	}
	if _, err := NewMarkerPipeline(CPUMarkers{m}, PipelineConfig{Fillers: 0, BatchBytes: 64 << 10, BatchPayloads: 1}); err == nil {
		t.Error("a pipeline of no fillers accepted")
	}
}

// TestEngineDeviceMarkersNone: an Engine without devices has no device
// markers (the caller's CPU fallback).
func TestEngineDeviceMarkersNone(t *testing.T) {
	m, err := rabin.NewMarker(rabin.DefaultPol, 32, 8)
	if err != nil {
		t.Fatal(err)
	}
	e := NewEngine(EngineConfig{})
	defer e.Close()
	if mk, err := e.DeviceMarkers(m); !errors.Is(err, ErrNoMarkersGPU) || mk != nil {
		t.Errorf("DeviceMarkers on a CPU engine: %v, %v; want ErrNoMarkersGPU", mk, err)
	}
}

// TestPipelinePlanRamps: the planner's runs cover every payload once, in
// order; the first Fillers runs are an eighth of a batch, the middle ones
// whole batches, and near the end each run at most half of what is left
// (down to an eighth of a batch) with RampDown; FlatStart turns the ramp
// up off.
func TestPipelinePlanRamps(t *testing.T) {
	const n, pl = 20000, 1460
	slot := (pl + rabin.PackAlign - 1) / rabin.PackAlign * rabin.PackAlign
	for _, cfg := range []PipelineConfig{{Fillers: 4, BatchBytes: 1 << 20, BatchPayloads: 1 << 20, RampDown: true},
		{Fillers: 4, BatchBytes: 1 << 20, BatchPayloads: 1 << 20, FlatStart: true}} {
		p := &MarkerPipeline{cfg: cfg}
		var runs []markerRun
		err := p.plan(n, func(int) int { return pl }, rabin.BitmapWords(n*slot), func(r markerRun) bool { runs = append(runs, r); return true })
		if err != nil {
			t.Fatal(err)
		}
		full, ramp := cfg.BatchBytes/slot, max(cfg.BatchBytes/8, 64<<10)/slot
		next := 0
		for i, r := range runs {
			if r.lo != next || r.hi <= r.lo || r.word != r.lo*slot/32 {
				t.Fatalf("%+v: run %d %+v after payload %d", cfg, i, r, next)
			}
			next = r.hi
			size, left := r.hi-r.lo, n-r.lo
			switch {
			case i < cfg.Fillers && !cfg.FlatStart:
				if size != ramp {
					t.Fatalf("%+v: run %d of %d payloads, want %d (the ramp up)", cfg, i, size, ramp)
				}
			case r.hi == n:
			case !cfg.RampDown || left >= 2*full:
				if size != full {
					t.Fatalf("%+v: run %d of %d payloads (%d left), want a whole batch of %d", cfg, i, size, left, full)
				}
			default:
				if size > max(left/2+1, ramp) || size < ramp {
					t.Fatalf("%+v: run %d of %d payloads with %d left: want at most half (or %d), at least %d", cfg, i, size, left, ramp, ramp)
				}
			}
		}
		if next != n {
			t.Fatalf("%+v: runs end at payload %d of %d", cfg, next, n)
		}
		t.Logf("%+v: %d runs, the last %v", cfg, len(runs), runs[max(0, len(runs)-5):])
	}
}

package gpu

import (
	"math/rand/v2"
	"testing"

	"github.com/gswitch/gswitch/tables/rabin"
)

// regionPayloads places payloads of markerLengths' lengths at random byte
// offsets of mem (some overlap, one ends at mem's last byte, one starts at
// its first) and returns their offsets and lengths, and the payloads as
// slices of mem.
func regionPayloads(rng *rand.Rand, mem []byte, n int) (srcs, lens []uint32, ps [][]byte) {
	for k, l := range markerLengths(rng, n) {
		l = min(l, len(mem))
		s := rng.IntN(len(mem) - l + 1)
		switch k {
		case 0:
			s = len(mem) - l
		case 1:
			s = 0
		}
		srcs, lens, ps = append(srcs, uint32(s)), append(lens, uint32(l)), append(ps, mem[s:s+l])
	}
	return srcs, lens, ps
}

// testRegionMarkers compares batches by reference (AddRef out of a region
// registered with mk) with rabin.Marker.Bitmap of rabin.Pack of the same
// payloads, bit for bit, several batches in flight, for several windows
// (the fixed-window kernels and the generic one) and masks; then a
// MarkerPipeline's BitmapRegion, and the rejects.
func testRegionMarkers(t *testing.T, mk RegionMarkers, m *rabin.Marker, mem []byte) {
	rng := rand.New(rand.NewPCG(21, uint64(m.W)))
	// The region is written once, before any batch: a receive ring's
	// payloads stay put until the batches that refer to them are done.
	for i := range mem {
		mem[i] = byte(rng.UintN(256))
	}
	h, err := mk.RegisterHost(mem)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := mk.UnregisterHost(h); err != nil {
			t.Error(err)
		}
	}()
	const nb = 3
	var batches []*MarkerBatch
	var want [][]uint32
	for k := 0; k < nb; k++ {
		srcs, lens, ps := regionPayloads(rng, mem, 300)
		b, err := mk.NewBatch(1<<20, 400)
		if err != nil {
			t.Fatal(err)
		}
		defer mk.FreeBatch(b)
		if b.AddRef(0, 1) {
			t.Fatal("AddRef without a region accepted")
		}
		b.Region = h
		for i := range srcs {
			if !b.AddRef(srcs[i], int(lens[i])) {
				t.Fatalf("payload of %d bytes did not fit", lens[i])
			}
		}
		buf, offs, plens := rabin.Pack(nil, nil, nil, ps...)
		if b.Bytes != len(buf) {
			t.Fatalf("AddRef packs %d bytes, rabin.Pack %d", b.Bytes, len(buf))
		}
		wb := make([]uint32, rabin.BitmapWords(len(buf)))
		if err := m.Bitmap(buf, offs, plens, wb); err != nil {
			t.Fatal(err)
		}
		for i := range b.Bitmap {
			b.Bitmap[i] = 0xdeadbeef
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
			t.Fatalf("%s by reference: w=%d batch %d: bitmap word %d = %#x, want %#x", mk.Name(), m.W, k, i, got[i], want[k][i])
		}
	}
	// A payload past the region's end.
	b := batches[0]
	b.Reset()
	if !b.AddRef(uint32(len(mem)-10), 11) {
		t.Fatal("AddRef refused a payload that fits the batch")
	}
	if err := mk.Submit(b); err == nil {
		t.Error("a payload past the region's end accepted")
	}
	b.Region = nil

	// The pipeline: by reference equals packing.
	srcs, lens, ps := regionPayloads(rng, mem, 2000)
	p, err := NewMarkerPipeline(mk, PipelineConfig{Fillers: 3, BatchBytes: 128 << 10, BatchPayloads: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	buf, offs, plens := rabin.Pack(nil, nil, nil, ps...)
	wb := make([]uint32, rabin.BitmapWords(len(buf)))
	got := make([]uint32, len(wb))
	for i := range wb {
		wb[i], got[i] = 0xdeadbeef, 0xdeadbeef
	}
	if err := m.Bitmap(buf, offs, plens, wb); err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 2; round++ {
		if err := p.BitmapRegion(h, srcs, lens, got); err != nil {
			t.Fatal(err)
		}
		if i := firstDiff(got, wb); i >= 0 {
			t.Fatalf("%s pipeline by reference, w=%d: bitmap word %d = %#x, want %#x", mk.Name(), m.W, i, got[i], wb[i])
		}
	}
	if err := p.BitmapRegion(h, srcs, lens[1:], got); err == nil {
		t.Error("BitmapRegion: sources and lengths of different counts accepted")
	}
	clear(got)
	if err := p.Bitmap(ps, got); err != nil {
		t.Fatal(err)
	}
	if i := firstDiff(got, wb); i >= 0 {
		t.Fatalf("pipeline after BitmapRegion: word %d differs", i)
	}
}

func TestCPUMarkersRegion(t *testing.T) {
	mem := make([]byte, 1<<20+4096)
	off := (16 - int(uintptr(addrOf(mem))%16)) % 16
	mem = mem[off : off+1<<20]
	for _, w := range []int{16, 31, 48} {
		m, err := rabin.NewMarker(rabin.DefaultPol, w, 3)
		if err != nil {
			t.Fatal(err)
		}
		testRegionMarkers(t, CPUMarkers{m}, m, mem)
	}
	mk := CPUMarkers{}
	for _, bad := range [][]byte{nil, mem[1:17], mem[:17]} {
		if _, err := mk.RegisterHost(bad); err == nil {
			t.Errorf("a region of %d bytes at offset %d accepted", len(bad), uintptr(addrOf(bad))%16)
		}
	}
}

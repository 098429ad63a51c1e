package rabin

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	restic "github.com/restic/chunker"
	"golang.org/x/sys/unix"
)

// slowFingerprint is the package doc's formula, term by term: Σ b_j ·
// x^{8(w−1−j)} mod p, each term's power computed from scratch.
func slowFingerprint(p Pol, window []byte) uint64 {
	var f uint64
	w := len(window)
	for j, b := range window {
		xp := uint64(1)
		for k := 0; k < 8*(w-1-j); k++ {
			xp = p.mulX(xp)
		}
		f ^= p.MulMod(p.mod(uint64(b)), xp)
	}
	return f
}

func TestIrreducible(t *testing.T) {
	for _, c := range []struct {
		p    Pol
		want bool
	}{
		{DefaultPol, true},
		{0x3DA3358B4DC173 ^ 2, false},
		{0b111, true},   // x²+x+1
		{0b101, false},  // x²+1 = (x+1)²
		{0b1011, true},  // x³+x+1
		{0b11111, true}, // x⁴+x³+x²+x+1
		{0b10101, false},
		{1<<63 | 0b11, true}, // x⁶³+x+1 is irreducible (a trinomial listed as primitive)
		{1<<63 | 1<<1 | 1<<0 | 1<<5, false},
	} {
		if got := c.p.Irreducible(); got != c.want {
			t.Errorf("%s.Irreducible() = %v, want %v", c.p, got, c.want)
		}
	}
	// Against restic's own test of the same.
	for i := 0; i < 200; i++ {
		p := Pol(rand.Uint64()>>11 | 1<<52 | 1)
		if got, want := p.Irreducible(), restic.Pol(p).Irreducible(); got != want {
			t.Fatalf("%s: Irreducible %v, restic says %v", p, got, want)
		}
	}
}

func TestParsePol(t *testing.T) {
	if p, err := ParsePol("0x3DA3358B4DC173", 53, 63); err != nil || p != DefaultPol {
		t.Fatalf("ParsePol default: %v %v", p, err)
	}
	for _, bad := range []string{"", "0x", "zz", "0x3DA3358B4DC172", "7", "-1", "0x1ffffffffffffffff"} {
		if _, err := ParsePol(bad, 53, 63); err == nil {
			t.Errorf("ParsePol(%q) accepted", bad)
		}
	}
}

func TestFingerprintFormula(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, p := range []Pol{DefaultPol, 1<<63 | 0b11, 0x3DA3358B4DC173} {
		for _, w := range []int{1, 2, 16, 32, 48, 64} {
			tb, err := NewTables(p, w)
			if err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 300)
			for i := range buf {
				buf[i] = byte(r.Uint32())
			}
			if len(buf) > 0 {
				buf[7] = 0xff
			}
			var f uint64
			for i := range buf {
				if i >= w {
					f ^= tb.out[buf[i-w]]
				}
				f = tb.append(f, buf[i])
				if i < w-1 {
					continue
				}
				want := slowFingerprint(p, buf[i-w+1:i+1])
				if f != want || tb.Fingerprint(buf[i-w+1:i+1]) != want {
					t.Fatalf("pol %s w %d at %d: rolling %#x direct %#x, formula %#x", p, w, i, f, tb.Fingerprint(buf[i-w+1:i+1]), want)
				}
				if want>>uint(p.Deg()) != 0 {
					t.Fatalf("fingerprint %#x not reduced", want)
				}
			}
		}
	}
}

func TestMarkers(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	m, err := NewMarker(DefaultPol, 32, 8)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, n := range []int{0, 1, 31, 32, 33, 100, 511, 512, 1460, 9000} {
		buf := make([]byte, n)
		for i := range buf {
			buf[i] = byte(r.Uint32())
		}
		got := m.Markers(nil, buf)
		var want []int32
		for i := 31; i < len(buf); i++ {
			if slowFingerprint(DefaultPol, buf[i-31:i+1])&0xff == 0 {
				want = append(want, int32(i))
			}
		}
		if len(got) != len(want) {
			t.Fatalf("%d bytes: markers %v, want %v", n, got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%d bytes: markers %v, want %v", n, got, want)
			}
		}
		total += len(got)
	}
	// 1,460 random bytes: about 1429/256 = 5.6 markers on average.
	sum := 0
	buf := make([]byte, 1460)
	for k := 0; k < 400; k++ {
		for i := range buf {
			buf[i] = byte(r.Uint32())
		}
		sum += len(m.Markers(nil, buf))
	}
	if avg := float64(sum) / 400; avg < 4.5 || avg > 6.7 {
		t.Errorf("%.2f markers per 1,460-byte payload, want about 5.6", avg)
	}
	if _, err := NewMarker(DefaultPol, 32, 0); err == nil {
		t.Error("0 mask bits accepted")
	}
	if _, err := NewMarker(0x11, 32, 8); err == nil {
		t.Error("degree-4 polynomial accepted")
	}
}

// resticChunks cuts data with restic/chunker v0.4.0.
func resticChunks(t testing.TB, data []byte, p ChunkParams) []Chunk {
	c := restic.NewWithBoundaries(bytes.NewReader(data), restic.Pol(p.Pol), uint(p.Min), uint(p.Max))
	c.SetAverageBits(p.AvgBits)
	var out []Chunk
	buf := make([]byte, 0, p.Max)
	for {
		k, err := c.Next(buf)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, Chunk{Start: int64(k.Start), Length: int(k.Length), Cut: k.Cut})
	}
}

func ourChunks(t testing.TB, r io.Reader, p ChunkParams) []Chunk {
	ch, err := NewChunker(r, p)
	if err != nil {
		t.Fatal(err)
	}
	var out []Chunk
	for {
		k, err := ch.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		k.Data = nil
		out = append(out, k)
	}
}

func TestChunksEqualRestic(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	random := make([]byte, 9<<20)
	for i := range random {
		random[i] = byte(r.Uint32())
	}
	var text bytes.Buffer
	words := strings.Fields("the quick brown fox jumps over a lazy dog while packets flow through gswitch and its GPU tables")
	for text.Len() < 2<<20 {
		text.WriteString(words[r.IntN(len(words))])
		if r.IntN(12) == 0 {
			text.WriteString(".\n")
		} else {
			text.WriteByte(' ')
		}
	}
	zeros := make([]byte, 9<<20)
	sets := []struct {
		name string
		data []byte
	}{
		{"random", random}, {"text", text.Bytes()}, {"zeros", zeros},
		{"empty", nil}, {"short", random[:1000]}, {"below-min", random[:512<<10-1]},
		{"min-minus-window", random[:512<<10-64]}, {"min-minus-window+5", random[:512<<10-59]},
		{"exactly-max", random[:8<<20]},
	}
	params := []ChunkParams{
		DefaultChunkParams(),
		{Pol: DefaultPol, Min: 64, Max: 4096, AvgBits: 8},
		{Pol: DefaultPol, Min: 2048, Max: 65536, AvgBits: 13},
		{Pol: DefaultPol, Min: 100, Max: 90, AvgBits: 10}, // max below min: cuts at min
		{Pol: 0x147ccfe7f2d2a1, Min: 4096, Max: 1 << 20, AvgBits: 16},
	}
	for i, p := range params {
		if !p.Pol.Irreducible() {
			t.Fatalf("test polynomial %s not irreducible", p.Pol)
		}
		for _, s := range sets {
			if i > 0 && len(s.data) > 1<<20 {
				// Small chunks: a megabyte gives hundreds of them (and keeps
				// the race detector's run short); the defaults need it all.
				s.data = s.data[:1<<20]
			}
			want := resticChunks(t, s.data, p)
			got := ourChunks(t, bytes.NewReader(s.data), p)
			// A reader that gives odd-sized pieces must not change the chunks.
			odd := ourChunks(t, &oddReader{data: s.data, r: r}, p)
			if !equalChunks(got, want) || !equalChunks(odd, want) {
				t.Errorf("%s %+v: %d chunks (%d with odd reads), restic %d; first difference: %s",
					s.name, p, len(got), len(odd), len(want), firstDiff(got, want))
			}
		}
	}
}

type oddReader struct {
	data []byte
	r    *rand.Rand
}

func (o *oddReader) Read(b []byte) (int, error) {
	if len(o.data) == 0 {
		return 0, io.EOF
	}
	n := min(len(b), len(o.data), 1+o.r.IntN(300000))
	copy(b, o.data[:n])
	o.data = o.data[n:]
	return n, nil
}

func equalChunks(a, b []Chunk) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Start != b[i].Start || a[i].Length != b[i].Length || a[i].Cut != b[i].Cut {
			return false
		}
	}
	return true
}

func firstDiff(a, b []Chunk) string {
	for i := range min(len(a), len(b)) {
		if a[i].Start != b[i].Start || a[i].Length != b[i].Length || a[i].Cut != b[i].Cut {
			return fmt.Sprintf("chunk %d: start %d length %d cut %#x, restic start %d length %d cut %#x",
				i, a[i].Start, a[i].Length, a[i].Cut, b[i].Start, b[i].Length, b[i].Cut)
		}
	}
	return "one list is a prefix of the other"
}

func TestChunkParamsRejected(t *testing.T) {
	for _, p := range []ChunkParams{
		{Pol: DefaultPol, Min: 63, Max: 1 << 20, AvgBits: 20},
		{Pol: 1<<63 | 0b11, Min: 1 << 19, Max: 1 << 23, AvgBits: 20},
		{Pol: DefaultPol, Min: 1 << 19, Max: 1 << 23, AvgBits: 0},
		{Pol: DefaultPol, Min: 1 << 19, Max: 0, AvgBits: 20},
	} {
		if _, err := NewCutter(p); err == nil {
			t.Errorf("%+v accepted", p)
		}
	}
}

func BenchmarkChunk(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 8))
	data := make([]byte, 64<<20)
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	p := DefaultChunkParams()
	b.Run("gswitch", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for range b.N {
			ourChunks(b, bytes.NewReader(data), p)
		}
	})
	b.Run("restic", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for range b.N {
			resticChunks(b, data, p)
		}
	})
}

func BenchmarkMarkers1460(b *testing.B) {
	m, _ := NewMarker(DefaultPol, 32, 8)
	buf := make([]byte, 1460)
	r := rand.New(rand.NewPCG(9, 10))
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	var dst []int32
	b.SetBytes(int64(len(buf)))
	for range b.N {
		dst = m.Markers(dst[:0], buf)
	}
}

func TestBitmapEqualsMarkers(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	m, err := NewMarker(DefaultPol, 32, 6)
	if err != nil {
		t.Fatal(err)
	}
	var payloads [][]byte
	for _, n := range []int{0, 1, 31, 32, 33, 63, 64, 65, 100, 1460, 1500, 9000} {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(r.Uint32())
		}
		payloads = append(payloads, p)
	}
	buf, offs, lens := Pack(nil, nil, nil, payloads...)
	bitmap := make([]uint32, BitmapWords(len(buf)))
	for i := range bitmap {
		bitmap[i] = 0xdeadbeef // every covered word must be rewritten
	}
	if err := m.Bitmap(buf, offs, lens, bitmap); err != nil {
		t.Fatal(err)
	}
	for k, p := range payloads {
		if offs[k]%PackAlign != 0 {
			t.Fatalf("payload %d at %d", k, offs[k])
		}
		want := map[int]bool{}
		for _, x := range m.Markers(nil, p) {
			want[int(x)] = true
		}
		for i := 0; i < len(p); i++ {
			at := int(offs[k]) + i
			if got := bitmap[at>>5]>>uint(at&31)&1 == 1; got != want[i] {
				t.Fatalf("payload %d position %d: bit %v, marker %v", k, i, got, want[i])
			}
		}
		// Bits past the payload's end in its last word are zero.
		if n := len(p); n%32 != 0 {
			if w := bitmap[(int(offs[k])+n-1)>>5]; w>>uint(n%32) != 0 {
				t.Fatalf("payload %d: bits set past its end: %#x", k, w)
			}
		}
	}
	if err := m.Bitmap(buf, []uint32{1}, []uint32{10}, bitmap); err == nil {
		t.Error("unaligned payload accepted")
	}
	if err := m.Bitmap(buf, []uint32{0}, []uint32{uint32(len(buf) + 1)}, bitmap); err == nil {
		t.Error("payload past the buffer accepted")
	}
}

func BenchmarkMarkersOneChain1460(b *testing.B) {
	m, _ := NewMarker(DefaultPol, 32, 8)
	buf := make([]byte, 1460)
	r := rand.New(rand.NewPCG(9, 10))
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	var dst []int32
	b.SetBytes(int64(len(buf)))
	for range b.N {
		dst, _ = m.oneChain(dst[:0], nil, buf, false)
	}
}

// TestMarkerLanes compares the four-lane markers (payloads of laneMin bytes
// and more) with one chain, over windows, mask bits and data with few,
// many (the lanes' overflow) and no markers.
func TestMarkerLanes(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	for _, c := range []struct{ w, bits int }{{32, 8}, {16, 4}, {48, 8}, {64, 12}, {7, 1}, {33, 2}} {
		m, err := NewMarker(DefaultPol, c.w, c.bits)
		if err != nil {
			t.Fatal(err)
		}
		for trial := 0; trial < 300; trial++ {
			n := r.IntN(5000)
			if trial%10 == 0 {
				n = laneMin + r.IntN(8)
			}
			buf := make([]byte, n)
			switch trial % 4 {
			case 0, 1:
				for i := range buf {
					buf[i] = byte(r.Uint32())
				}
			case 2: // long runs of zeros: a marker at every byte
				for i := 0; i < n; i += 200 {
					buf[i] = byte(r.Uint32())
				}
			case 3: // a few distinct bytes
				for i := range buf {
					buf[i] = "ab\n"[r.IntN(3)]
				}
			}
			gotP, gotF := m.MarkersFP(nil, nil, buf)
			var wantP []int32
			var wantF []uint64
			if n >= c.w {
				wantP, wantF = m.oneChain(nil, nil, buf, true)
			}
			if !slices.Equal(gotP, wantP) || !slices.Equal(gotF, wantF) {
				t.Fatalf("w %d bits %d, %d bytes (case %d): markers %v, want %v", c.w, c.bits, n, trial%4, gotP, wantP)
			}
			if got := m.Markers([]int32{-1}, buf); !slices.Equal(got[1:], wantP) || got[0] != -1 {
				t.Fatalf("Markers appends %v, want %v after -1", got, wantP)
			}
			for k, p := range wantP {
				if k%7 == 0 && m.FingerprintAt(buf, int(p)) != wantF[k] {
					t.Fatalf("fingerprint at %d: %x, want %x", p, wantF[k], m.FingerprintAt(buf, int(p)))
				}
			}
		}
	}
}

// BenchmarkChunkVsRestic chunks the same 32 MiB of random data with this
// package and with restic/chunker v0.4.0 in alternation, each iteration
// both (in turns first), on one locked OS thread, so that a machine's
// changing load hits the two alike; it reports each one's rate per second
// of the thread's CPU time (getrusage RUSAGE_THREAD: time the thread waited
// for a core does not count) and the median of the iterations' paired
// ratios (gswitch/restic), and checks the chunks equal.
func BenchmarkChunkVsRestic(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 8))
	data := make([]byte, 32<<20)
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	p := DefaultChunkParams()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var ours, theirs time.Duration
	var ratios []float64
	b.SetBytes(int64(len(data)))
	for i := 0; i < b.N; i++ {
		var a, c []Chunk
		var dOurs, dTheirs time.Duration
		runOurs := func() {
			t0 := threadCPU()
			a = ourChunks(b, bytes.NewReader(data), p)
			dOurs = threadCPU() - t0
		}
		runTheirs := func() {
			t0 := threadCPU()
			c = resticChunks(b, data, p)
			dTheirs = threadCPU() - t0
		}
		if i%2 == 0 {
			runOurs()
			runTheirs()
		} else {
			runTheirs()
			runOurs()
		}
		ours, theirs = ours+dOurs, theirs+dTheirs
		ratios = append(ratios, dTheirs.Seconds()/dOurs.Seconds())
		if !slices.EqualFunc(a, c, func(x, y Chunk) bool { return x.Start == y.Start && x.Length == y.Length && x.Cut == y.Cut }) {
			b.Fatal("chunks differ from restic's")
		}
	}
	slices.Sort(ratios)
	mb := float64(b.N) * float64(len(data)) / 1e6
	b.ReportMetric(mb/ours.Seconds(), "gswitch-MB/cpu-s")
	b.ReportMetric(mb/theirs.Seconds(), "restic-MB/cpu-s")
	b.ReportMetric(ratios[len(ratios)/2], "x-restic")
}

// threadCPU returns the CPU time of the calling OS thread.
func threadCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestCutLanes compares the lanes' rounds with each candidate's window
// fingerprinted directly, for polynomials of several degrees (the lanes
// keep fingerprints left-aligned by 64 − degree) and mask bits that put
// hits in every lane, at a round's first candidate and nowhere.
func TestCutLanes(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	pols := []Pol{DefaultPol, 0x147ccfe7f2d2a1}
	for _, deg := range []int{12, 31, 40} {
		for {
			p := Pol(1<<uint(deg) | r.Uint64()&(1<<uint(deg)-1) | 1)
			if p.Irreducible() {
				pols = append(pols, p)
				break
			}
		}
	}
	buf := make([]byte, laneSpan)
	for _, pol := range pols {
		for _, bits := range []int{1, 4, 11, 13, 15} {
			c, err := NewCutter(ChunkParams{Pol: pol, Min: ChunkWindow, Max: 1 << 20, AvgBits: bits})
			if err != nil {
				t.Fatal(err)
			}
			for trial := 0; trial < 6; trial++ {
				for i := range buf {
					buf[i] = byte(r.Uint32())
				}
				if trial == 5 { // a hit at candidate 0 of every lane
					clear(buf)
				}
				want, wantCut := -1, uint64(0)
				for i := 0; i+ChunkWindow <= len(buf); i++ {
					if f := c.t.Fingerprint(buf[i : i+ChunkWindow]); f&c.mask == 0 {
						want, wantCut = i, f
						break
					}
				}
				got, cut := c.lt.round((*[laneSpan]byte)(buf))
				if got != want || (want >= 0 && cut != wantCut) {
					t.Fatalf("pol %s bits %d trial %d: round gives %d (cut %#x), want %d (%#x)", pol, bits, trial, got, cut, want, wantCut)
				}
			}
		}
	}
}

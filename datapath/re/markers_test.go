package re

import (
	"bytes"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/gswitch/gswitch/gpu"
)

// realFrames returns TCP frames of real payloads: Go's own net/http
// sources (text), sent twice with other segment boundaries (so that the
// second copy is encoded), then zeros and a few odd lengths.
func realFrames(t testing.TB, limit int) [][]byte {
	t.Helper()
	// Go's own net/http sources, or this repository's where Go is not
	// installed (the device machine runs the compiled tests over a copy
	// of the tree).
	root := filepath.Join(runtime.GOROOT(), "src", "net", "http")
	if _, err := os.Stat(root); err != nil {
		root = filepath.Join("..", "..")
	}
	var names []string
	filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.IsDir() && strings.HasPrefix(e.Name(), ".") && p != root {
			return filepath.SkipDir
		}
		if err == nil && e.Type().IsRegular() && strings.HasSuffix(p, ".go") {
			names = append(names, p)
		}
		return nil
	})
	sort.Strings(names)
	var text []byte
	for _, p := range names {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		text = append(text, b...)
		if len(text) > limit {
			break
		}
	}
	if len(text) < 64<<10 {
		t.Fatalf("%s: %d bytes of sources, want a source tree", root, len(text))
	}
	frames := transfer(text, 1, 1)
	frames = append(frames, segments(text, 2, 1, 1000, 1448, 700, 1460, 64, 1200)...)
	frames = append(frames, transfer(make([]byte, 64<<10), 3, 1)...)
	for _, n := range []int{63, 64, 65, 100, 511, 512, 513, 9000} {
		frames = append(frames, tcpFrame([4]byte{10, 0, 0, 2}, [4]byte{10, 0, 0, 1}, 80, 4, uint32(n), text[:n]))
	}
	return frames
}

// twinEncoders returns two encoders of one epoch, the second with markers
// mk for batches of at least minBatch payloads, each acknowledged by a
// decoder of its own.
func twinEncoders(t testing.TB, mk Markers, minBatch int) (cpu, dev *Encoder, dc, dd *Decoder) {
	t.Helper()
	var err error
	if cpu, err = NewEncoder(Config{}); err != nil {
		t.Fatal(err)
	}
	if dev, err = NewEncoder(Config{Markers: mk, MinBatch: minBatch}); err != nil {
		t.Fatal(err)
	}
	dev.epoch = cpu.epoch
	dc, _ = NewDecoder(Config{})
	dd, _ = NewDecoder(Config{})
	cpu.HandleControl(dc.Hello(macA, macB))
	dev.HandleControl(dd.Hello(macA, macB))
	return cpu, dev, dc, dd
}

// sameEncoding runs frames in batches of batch through both encoders (and
// their decoders, acknowledging after each batch) and requires equal
// frames on the wire, each restored to the frame sent.
func sameEncoding(t testing.TB, frames [][]byte, batch int, cpu, dev *Encoder, dc, dd *Decoder) {
	t.Helper()
	var sc, sd Scratch
	var rc, rd [][]byte
	var ac, ad []byte
	for lo := 0; lo < len(frames); lo += batch {
		in := frames[lo:min(lo+batch, len(frames))]
		rc, ac = cpu.EncodeBatch(&sc, in, rc[:0], ac[:0])
		rd, ad = dev.EncodeBatch(&sd, in, rd[:0], ad[:0])
		for i := range in {
			if !bytes.Equal(rc[i], rd[i]) {
				t.Fatalf("frame %d: the encoders differ: %d bytes on the CPU, %d with %s markers", lo+i, len(rc[i]), len(rd[i]), dev.markers.Name())
			}
			for _, d := range []*Decoder{dc, dd} {
				res, v, err := d.Receive(rd[i], nil)
				if v != Plain && v != Restored || !bytes.Equal(res, in[i]) {
					t.Fatalf("frame %d: decoded %v (%v), differs from the frame sent", lo+i, v, err)
				}
			}
		}
		for _, c := range dc.ControlFrames(macA, macB) {
			cpu.HandleControl(c)
		}
		for _, c := range dd.ControlFrames(macA, macB) {
			dev.HandleControl(c)
		}
	}
	if cpu.Stats.Encoded.Load() == 0 {
		t.Fatal("nothing was encoded: the test data repeats nothing")
	}
}

// TestMarkersSeam: an encoder whose markers come from a Markers backend
// (the CPU one, and DeviceMarkers over gpu's CPU twin, which packs batches
// as a GPU takes them) encodes every frame exactly as one that computes
// them itself.
func TestMarkersSeam(t *testing.T) {
	frames := realFrames(t, 1<<20)
	cfg, _ := Config{}.withDefaults()
	m, err := cfg.Marker()
	if err != nil {
		t.Fatal(err)
	}
	dm, err := NewDeviceMarkers(gpu.CPUMarkers{M: m}, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer dm.Close()
	for _, mk := range []Markers{CPUMarkers{M: m}, dm} {
		cpu, dev, dc, dd := twinEncoders(t, mk, 4)
		sameEncoding(t, frames, 600, cpu, dev, dc, dd) // larger than a device batch: two rounds
		if dev.Stats.OffloadBatches.Load() == 0 || dev.Stats.OffloadFailures.Load() != 0 {
			t.Errorf("%s: %d batches offloaded, %d failed", mk.Name(), dev.Stats.OffloadBatches.Load(), dev.Stats.OffloadFailures.Load())
		}
	}
}

// failMarkers fails every call.
type failMarkers struct{}

func (failMarkers) Name() string                      { return "broken" }
func (failMarkers) Markers([][]byte, [][]int32) error { return errors.New("device lost") }

// TestMarkersFallback: a backend that fails leaves the batch to the CPU,
// counted; the frames are encoded all the same. DeviceMarkers stays out of
// service after a failure.
func TestMarkersFallback(t *testing.T) {
	frames := realFrames(t, 256<<10)
	cpu, dev, dc, dd := twinEncoders(t, failMarkers{}, 1)
	sameEncoding(t, frames, 64, cpu, dev, dc, dd)
	if dev.Stats.OffloadFailures.Load() == 0 || dev.Stats.OffloadBatches.Load() != 0 {
		t.Errorf("%d failures, %d offloaded: want every batch failed over", dev.Stats.OffloadFailures.Load(), dev.Stats.OffloadBatches.Load())
	}
	if c := dev.Counters(); c.Markers != "broken" || c.OffloadFailures == 0 {
		t.Errorf("counters %+v", c)
	}
	m, _ := Config{}.Marker()
	dm, _ := NewDeviceMarkers(gpu.CPUMarkers{M: m}, 1)
	big := [][]byte{make([]byte, DeviceBatchBytes+1)}
	if err := dm.Markers(big, make([][]int32, 1)); err == nil || dm.Err() == nil {
		t.Fatal("a payload larger than a device batch was accepted")
	}
	if err := dm.Markers([][]byte{make([]byte, 100)}, make([][]int32, 1)); err == nil {
		t.Error("device markers back in service after a failure")
	}
}

// TestLazyMarkers: the CPU's lazy markers (taken from the matched logged
// payloads inside repeated runs) are every payload's markers: each logged
// entry's markers and fingerprints equal rabin's over its bytes, and the
// encoder puts on the wire what one with every marker computed in advance
// does — on a buffer sent over and over in segments of changing sizes,
// edited copies and runs of zeros.
func TestLazyMarkers(t *testing.T) {
	r := rand.New(rand.NewPCG(61, 62))
	buf := randomBytes(r, 40<<10)
	var stream []byte
	for pass := 0; pass < 6; pass++ {
		b := append([]byte(nil), buf...)
		for k := 0; k < pass*3; k++ { // a few edits per pass
			at := r.IntN(len(b) - 64)
			copy(b[at:], randomBytes(r, 1+r.IntN(40)))
		}
		stream = append(stream, b...)
		if pass == 3 {
			stream = append(stream, make([]byte, 5000)...)
		}
	}
	var frames [][]byte
	for off, k := 0, 0; off < len(stream); k++ {
		n := []int{1448, 1460, 700, 1448, 1000, 1448, 64, 1448, 200}[k%9]
		end := min(off+n, len(stream))
		frames = append(frames, tcpFrame([4]byte{10, 0, 0, 2}, [4]byte{10, 0, 0, 1}, 80, 7, uint32(off), stream[off:end]))
		off = end
	}
	m, _ := Config{}.Marker()
	lazy, eager, dl, de := twinEncoders(t, CPUMarkers{M: m}, 1)
	sameEncoding(t, frames, 32, lazy, eager, dl, de)
	entries := 0
	lazy.log.each(func(x *entry) {
		pos, fps := m.MarkersFP(nil, nil, x.data)
		if len(pos) != len(x.markers) || !slices.Equal(fps, x.fps) {
			t.Fatalf("payload %x: markers %v, want %v", x.id, x.markers, pos)
		}
		for k, p := range pos {
			if int(x.markers[k]) != int(p) {
				t.Fatalf("payload %x: markers %v, want %v", x.id, x.markers, pos)
			}
		}
		entries++
	})
	if entries < len(frames)/2 || lazy.Stats.Encoded.Load() < uint64(len(frames)/2) {
		t.Fatalf("%d payloads logged, %d encoded of %d frames", entries, lazy.Stats.Encoded.Load(), len(frames))
	}
}

package re

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/gswitch/gswitch/bench/benchutil"
	"github.com/gswitch/gswitch/tables/rabin"
)

func run(t *testing.T, args ...string) ([]Result, error) {
	t.Helper()
	var out bytes.Buffer
	err := Run(context.Background(), append([]string{"--json"}, args...), &out, io.Discard)
	var rs []Result
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var r Result
		if e := json.Unmarshal(sc.Bytes(), &r); e != nil {
			t.Fatalf("%v: %s", e, sc.Text())
		}
		rs = append(rs, r)
	}
	return rs, err
}

// TestRun: a small run of both measures on every data set: rates, the
// marker density of the window and bits (about 1,460/256 per payload) and
// chunks identical to restic's.
func TestRun(t *testing.T) {
	rs, err := run(t, "--payloads", "2000", "--bytes", "3000000", "--min", "8192", "--max", "65536", "--avg-bits", "13",
		"--rounds", "2", "--data", "random,text,zeros")
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 4 {
		t.Fatalf("%d results, want 4: %+v", len(rs), rs)
	}
	m := rs[0]
	if m.Measure != "markers" || m.Gbps <= 0 || m.GbpsBitmap <= 0 || !m.Identical || m.MarkersPerPayload < 4 || m.MarkersPerPayload > 7.5 {
		t.Errorf("markers: %+v", m)
	}
	for _, c := range rs[1:] {
		if c.Measure != "chunk" || c.MBps <= 0 || c.ResticMBps <= 0 || c.RatioCPU <= 0 || c.MBpsCPU <= 0 || !c.Identical || c.Chunks < 1 || c.Bytes != 3000000 {
			t.Errorf("chunk %s: %+v", c.Data, c)
		}
		if c.Data != "zeros" && c.Chunks < 10 {
			t.Errorf("chunk %s: %d chunks of 3 MB with 8 KiB average: too few", c.Data, c.Chunks)
		}
	}
	var text bytes.Buffer
	if err := Run(context.Background(), []string{"--measure", "chunk", "--bytes", "100000", "--min", "4096", "--max", "16384", "--avg-bits", "12", "--rounds", "1", "--data", "text"}, &text, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "restic") || !strings.Contains(text.String(), "identical true") {
		t.Errorf("text output:\n%s", text.String())
	}
}

// fakeGPU is a GPU marker backend on the CPU, optionally wrong.
type fakeGPU struct {
	m     *rabin.Marker
	wrong bool
	ring  *[]byte
}

func (g fakeGPU) Bitmap(payloads [][]byte, bitmap []uint32) error {
	buf, offs, lens := rabin.Pack(nil, nil, nil, payloads...)
	err := g.m.Bitmap(buf, offs, lens, bitmap)
	if g.wrong {
		bitmap[len(bitmap)/2] ^= 1
	}
	return err
}
func (g fakeGPU) RxRing(n int) ([]byte, error) { *g.ring = make([]byte, n); return *g.ring, nil }
func (g fakeGPU) BitmapRing(_ string, srcs, lens []uint32, bitmap []uint32) error {
	ps := make([][]byte, len(srcs))
	for k, s := range srcs {
		ps[k] = (*g.ring)[s : s+lens[k]]
	}
	return g.Bitmap(ps, bitmap)
}
func (g fakeGPU) RingSeconds(string, []uint32, []uint32, int) (float64, error)   { return 1e-3, nil }
func (g fakeGPU) CopyCounts() (int64, int64, int64)                              { return 0, 0, 0 }
func (g fakeGPU) KernelSeconds([]byte, []uint32, []uint32, int) (float64, error) { return 1e-3, nil }
func (g fakeGPU) CopyGbps() (float64, float64, error)                            { return 400, 400, nil }
func (g fakeGPU) Device() string                                                 { return "fake" }
func (g fakeGPU) Shape() string                                                  { return "fake" }
func (g fakeGPU) Close()                                                         {}

// TestGPUSeam: without the glue --backend gpu is a usage error; with it
// the device's bitmaps are compared with the CPU's, and a wrong one is a
// mismatch.
func TestGPUSeam(t *testing.T) {
	glue := NewGPUMarkers // set in a build with CUDA
	defer func() { NewGPUMarkers = glue }()
	NewGPUMarkers = nil
	if _, err := run(t, "--backend", "gpu"); !errors.Is(err, benchutil.ErrUsage) || !strings.Contains(err.Error(), "not built") {
		t.Fatalf("--backend gpu without the glue: %v", err)
	}
	for _, wrong := range []bool{false, true} {
		NewGPUMarkers = func(pol rabin.Pol, w, b int, _ GPUOptions) (GPUMarkers, error) {
			m, err := rabin.NewMarker(pol, w, b)
			return fakeGPU{m, wrong, new([]byte)}, err
		}
		rs, err := run(t, "--backend", "gpu", "--measure", "markers", "--payloads", "500", "--rounds", "1")
		if wrong != errors.Is(err, benchutil.ErrMismatch) || len(rs) != 4 {
			t.Fatalf("wrong %v: %v, %d results", wrong, err, len(rs))
		}
		for i, path := range []string{"pack", "gather", "copy"} {
			g := rs[1+i]
			if g.Backend != "gpu" || g.GPU != "fake" || g.GPUPath != path || g.GbpsKernel <= 0 || g.GbpsCPU != rs[0].Gbps ||
				g.Identical == wrong || (path == "gather") != (g.GbpsGather > 0) || (path == "copy") != (g.GbpsCopy > 0) ||
				g.RxFrame != 2048 || g.RxOffset != 66 {
				t.Errorf("gpu result: %+v", g)
			}
		}
		rs, err = run(t, "--backend", "gpu", "--measure", "markers", "--payloads", "50", "--rounds", "1", "--gpu-path", "gather", "--rx-offset", "3", "--rx-frame", "1472")
		NewGPUMarkers = nil
		if wrong != errors.Is(err, benchutil.ErrMismatch) || len(rs) != 2 || rs[1].GPUPath != "gather" || rs[1].Identical == wrong {
			t.Fatalf("--gpu-path gather, wrong %v: %v, %+v", wrong, err, rs)
		}
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--backend", "tpu"}, {"--rounds", "0"}, {"--data", "video"}, {"--measure", "speed"},
		{"--pol", "0x3"}, {"--min", "10"}, {"--bits", "0"}, {"extra"}, {"--gpu-path", "dma"},
		{"--rx-frame", "1000"}, {"--rx-offset", "-1"}, {"--rx-frame", "1480", "--rx-offset", "30"},
	} {
		if _, err := run(t, args...); !errors.Is(err, benchutil.ErrUsage) {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
}

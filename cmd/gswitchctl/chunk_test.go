package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	restic "github.com/restic/chunker"

	"github.com/gswitch/gswitch/gpu"

	"github.com/gswitch/gswitch/tables/rabin"
)

type chunkLine struct {
	File   string `json:"file"`
	Offset uint   `json:"offset"`
	Length uint   `json:"length"`
	Cut    uint64 `json:"cut"`
}

// TestChunkCommandEqualsRestic runs gswitchctl chunk --json on random, text,
// all-zero and short files and compares every line with restic/chunker
// v0.4.0's chunks of the same file and parameters.
func TestChunkCommandEqualsRestic(t *testing.T) {
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(1, 1))
	random := make([]byte, 3<<20)
	for i := range random {
		random[i] = byte(r.Uint32())
	}
	text := []byte(strings.Repeat("GET /index.html HTTP/1.1\r\nHost: h2\r\n\r\n", 40000))
	files := map[string][]byte{
		"random": random, "text": text, "zeros": make([]byte, 2<<20), "short": random[:100], "empty": nil,
	}
	var names []string
	for n, data := range files {
		p := filepath.Join(dir, n)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		names = append(names, p)
	}
	var out, errb bytes.Buffer
	args := append([]string{"--min", "4096", "--max", "65536", "--avg-bits", "12", "--json"}, names...)
	if err := runChunk(args, &out, &errb); err != nil {
		t.Fatalf("chunk: %v (%s)", err, errb.String())
	}
	got := map[string][]chunkLine{}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var l chunkLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		got[l.File] = append(got[l.File], l)
	}
	for _, p := range names {
		c := restic.NewWithBoundaries(bytes.NewReader(files[filepath.Base(p)]), restic.Pol(rabin.DefaultPol), 4096, 65536)
		c.SetAverageBits(12)
		var want []chunkLine
		for {
			k, err := c.Next(nil)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, chunkLine{p, k.Start, k.Length, k.Cut})
		}
		if len(got[p]) != len(want) {
			t.Fatalf("%s: %d chunks, restic %d", p, len(got[p]), len(want))
		}
		for i := range want {
			if got[p][i] != want[i] {
				t.Fatalf("%s chunk %d: %+v, restic %+v", p, i, got[p][i], want[i])
			}
		}
	}
	if len(got[filepath.Join(dir, "random")]) < 20 {
		t.Errorf("random file: only %d chunks", len(got[filepath.Join(dir, "random")]))
	}
}

func TestChunkDedupAndErrors(t *testing.T) {
	dir := t.TempDir()
	data := make([]byte, 1<<20)
	r := rand.New(rand.NewPCG(2, 2))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	os.WriteFile(a, data, 0o644)
	os.WriteFile(b, append(append([]byte{}, data...), data[:1000]...), 0o644)
	var out, errb bytes.Buffer
	if err := runChunk([]string{"--min", "1024", "--max", "16384", "--avg-bits", "11", "--dedup", "--json", a, b}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("want 3 summary lines, got %q", out.String())
	}
	var second struct {
		Bytes         int64   `json:"bytes"`
		RepeatedBytes int64   `json:"repeated_bytes"`
		RepeatedPct   float64 `json:"repeated_pct"`
	}
	json.Unmarshal([]byte(lines[1]), &second)
	// b is a's bytes and 1,000 more: all of a's chunks but the last recur.
	if second.Bytes != 1<<20+1000 || second.RepeatedPct < 95 {
		t.Errorf("second file: %+v, want nearly all repeated", second)
	}
	for _, bad := range [][]string{
		{"--min", "10", a}, {"--pol", "0x3DA3358B4DC172", a}, {"--pol", "0xc000000000000003", a},
		{"--backend", "fpga", a}, {"--avg-bits", "0", a}, {},
	} {
		if err := runChunk(bad, io.Discard, io.Discard); !errors.Is(err, errUsage) {
			t.Errorf("chunk %v: %v, want a usage error", bad, err)
		}
	}
	if err := runChunk([]string{filepath.Join(dir, "missing")}, io.Discard, io.Discard); err == nil || errors.Is(err, errUsage) {
		t.Errorf("missing file: %v", err)
	}
}

func TestREMarkersCommand(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "payload")
	data := make([]byte, 1460)
	r := rand.New(rand.NewPCG(3, 3))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	os.WriteFile(p, data, 0o644)
	short := filepath.Join(dir, "short")
	os.WriteFile(short, data[:31], 0o644)
	var out bytes.Buffer
	if err := runRE([]string{"markers", "--json", p, short}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(&out)
	var a, b struct {
		File    string  `json:"file"`
		Markers []int32 `json:"markers"`
	}
	if err := dec.Decode(&a); err != nil {
		t.Fatal(err)
	}
	if err := dec.Decode(&b); err != nil {
		t.Fatal(err)
	}
	m, _ := rabin.NewMarker(rabin.DefaultPol, 32, 8)
	tb, _ := rabin.NewTables(rabin.DefaultPol, 32)
	// Every reported position's window fingerprint has its low 8 bits zero,
	// and every other position's does not.
	set := map[int32]bool{}
	for _, x := range a.Markers {
		set[x] = true
	}
	for i := 31; i < len(data); i++ {
		isMarker := tb.Fingerprint(data[i-31:i+1])&0xff == 0
		if isMarker != set[int32(i)] {
			t.Fatalf("position %d: marker %v, reported %v", i, isMarker, set[int32(i)])
		}
	}
	if len(a.Markers) != len(m.Markers(nil, data)) || b.Markers == nil || len(b.Markers) != 0 {
		t.Errorf("markers %v / short file %v (want [])", a.Markers, b.Markers)
	}
	if err := runRE([]string{"markers", "--pol", "0x3DA3358B4DC173", "--bits", "40", p}, io.Discard, io.Discard); !errors.Is(err, errUsage) {
		t.Errorf("--bits 40: %v", err)
	}
	if err := runRE([]string{"frobnicate"}, io.Discard, io.Discard); !errors.Is(err, errUsage) {
		t.Errorf("unknown re command: %v", err)
	}
}

// TestMarkerChunksEqualChunker checks the cut selection of --backend gpu
// (markerChunks) with the CPU's markers against rabin.Chunker: the same
// chunks and cuts on random, text, all-zero, short and empty data.
func TestMarkerChunksEqualChunker(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	random := make([]byte, 3<<20)
	for i := range random {
		random[i] = byte(r.Uint32())
	}
	text := []byte(strings.Repeat("GET /index.html HTTP/1.1\r\nHost: h2\r\n\r\n", 40000))
	for _, p := range []rabin.ChunkParams{
		{Pol: rabin.DefaultPol, Min: 4096, Max: 65536, AvgBits: 12},
		{Pol: rabin.DefaultPol, Min: 64, Max: 1000, AvgBits: 6},
		{Pol: rabin.DefaultPol, Min: 9000, Max: 5000, AvgBits: 14},
	} {
		m, err := rabin.NewMarker(p.Pol, rabin.ChunkWindow, p.AvgBits)
		if err != nil {
			t.Fatal(err)
		}
		for name, data := range map[string][]byte{"random": random, "text": text, "zeros": make([]byte, 1<<20), "short": random[:100], "empty": nil} {
			var got []rabin.Chunk
			err := markerChunks(gpu.CPUMarkers{M: m}, p, data, func(k rabin.Chunk) error {
				k.Data = nil
				got = append(got, k)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			ch, err := rabin.NewChunker(bytes.NewReader(data), p)
			if err != nil {
				t.Fatal(err)
			}
			var want []rabin.Chunk
			for {
				k, err := ch.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				k.Data = nil
				want = append(want, k)
			}
			if len(got) != len(want) {
				t.Fatalf("%+v %s: %d chunks, want %d", p, name, len(got), len(want))
			}
			for i := range got {
				if got[i].Start != want[i].Start || got[i].Length != want[i].Length || got[i].Cut != want[i].Cut {
					t.Fatalf("%+v %s: chunk %d = %+v, want %+v", p, name, i, got[i], want[i])
				}
			}
		}
	}
}

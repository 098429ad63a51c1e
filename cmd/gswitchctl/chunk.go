package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/rabin"
)

const chunkUsage = `gswitchctl chunk [--pol HEX] [--min N] [--max N] [--avg-bits B] [--backend cpu|gpu] [--json] [--dedup] FILE...

Cuts each file into content-defined chunks, as github.com/restic/chunker v0.4.0
does with the same polynomial, boundaries and average bits (NewWithBoundaries,
SetAverageBits), and prints one line per chunk: FILE OFFSET LENGTH CUT, or with
--json {"file", "offset", "length", "cut"}. CUT is the chunk's cut fingerprint
(for a file's last chunk, restic's rolling state at the end). With --dedup it
prints instead, per file and in total, how many of the bytes are chunks seen
before (SHA-256 of each chunk, across all the files given).

With --backend gpu (a build with -tags cuda) GPU 0 computes the markers of
every 64-byte window of the file (kernels/rabin.cu, the file cut into 64 KiB
payloads) and the CPU picks the cuts from them: the same chunks as the CPU's.
The file is read whole into memory, and --avg-bits is at most 32 there.
`

// chunkFlags are gswitchctl chunk's flags.
type chunkFlags struct {
	pol     string
	min     int
	max     int
	avgBits int
	backend string
	json    bool
	dedup   bool
	markers gpu.Markers // --backend gpu: the markers of the 64-byte windows
}

func runChunk(args []string, stdout, stderr io.Writer) error {
	var f chunkFlags
	fs := flag.NewFlagSet("chunk", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, chunkUsage); fs.PrintDefaults() }
	fs.StringVar(&f.pol, "pol", rabin.DefaultPol.String(), "irreducible polynomial over GF(2), degree 9..53 (hexadecimal with 0x)")
	fs.IntVar(&f.min, "min", rabin.DefaultMinSize, "smallest chunk in bytes (at least the 64-byte window)")
	fs.IntVar(&f.max, "max", rabin.DefaultMaxSize, "largest chunk in bytes")
	fs.IntVar(&f.avgBits, "avg-bits", rabin.DefaultAvgBits, "cut where the fingerprint's low B bits are zero: chunks of about 2^B bytes past --min")
	fs.StringVar(&f.backend, "backend", "cpu", "cpu, or gpu: markers on the GPU, cuts picked on the CPU (a build with -tags cuda)")
	fs.BoolVar(&f.json, "json", false, "one JSON object per line")
	fs.BoolVar(&f.dedup, "dedup", false, "report the bytes of repeated chunks instead of the chunks")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: chunk: %v", errUsage, err)
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("%w: chunk: no file given", errUsage)
	}
	if f.backend != "cpu" && f.backend != "gpu" {
		return fmt.Errorf("%w: chunk: --backend %q: want cpu or gpu", errUsage, f.backend)
	}
	pol, err := rabin.ParsePol(f.pol, 9, rabin.MaxChunkPolDeg)
	if err != nil {
		return fmt.Errorf("%w: chunk: --pol: %v", errUsage, err)
	}
	p := rabin.ChunkParams{Pol: pol, Min: f.min, Max: f.max, AvgBits: f.avgBits}
	if _, err := rabin.NewCutter(p); err != nil {
		return fmt.Errorf("%w: chunk: %v", errUsage, err)
	}
	if f.backend == "gpu" {
		if f.avgBits > 32 {
			return fmt.Errorf("%w: chunk: --backend gpu takes --avg-bits up to 32", errUsage)
		}
		m, err := rabin.NewMarker(pol, rabin.ChunkWindow, f.avgBits)
		if err != nil {
			return fmt.Errorf("%w: chunk: %v", errUsage, err)
		}
		mk, err := gpu.OpenMarkers("gpu", m)
		if err != nil {
			return fmt.Errorf("chunk: --backend gpu: %w", err)
		}
		defer mk.Close()
		f.markers = mk
	}
	out := bufio.NewWriterSize(stdout, 1<<16)
	defer out.Flush()
	seen := map[[sha256.Size]byte]bool{}
	var total dedupCount
	for _, name := range fs.Args() {
		c, err := chunkFile(name, p, out, f, seen)
		if err != nil {
			return err
		}
		total.add(c)
		if f.dedup {
			if err := writeDedup(out, name, c, f.json); err != nil {
				return err
			}
		}
	}
	if f.dedup && fs.NArg() > 1 {
		return writeDedup(out, "", total, f.json)
	}
	return nil
}

// dedupCount counts a file's bytes and the bytes of chunks seen before.
type dedupCount struct {
	Bytes, Chunks, RepeatedBytes, RepeatedChunks int64
}

func (d *dedupCount) add(o dedupCount) {
	d.Bytes += o.Bytes
	d.Chunks += o.Chunks
	d.RepeatedBytes += o.RepeatedBytes
	d.RepeatedChunks += o.RepeatedChunks
}

func chunkFile(name string, p rabin.ChunkParams, out io.Writer, f chunkFlags, seen map[[sha256.Size]byte]bool) (dedupCount, error) {
	var c dedupCount
	enc := json.NewEncoder(out)
	emit := func(k rabin.Chunk) error {
		c.Bytes += int64(k.Length)
		c.Chunks++
		switch {
		case f.dedup:
			sum := sha256.Sum256(k.Data)
			if seen[sum] {
				c.RepeatedBytes += int64(k.Length)
				c.RepeatedChunks++
			}
			seen[sum] = true
			return nil
		case f.json:
			return enc.Encode(struct {
				File   string `json:"file"`
				Offset int64  `json:"offset"`
				Length int    `json:"length"`
				Cut    uint64 `json:"cut"`
			}{name, k.Start, k.Length, k.Cut})
		}
		_, err := fmt.Fprintf(out, "%s %d %d %#x\n", name, k.Start, k.Length, k.Cut)
		return err
	}
	if f.markers != nil {
		data, err := os.ReadFile(name)
		if err != nil {
			return c, fmt.Errorf("chunk: %w", err)
		}
		if err := markerChunks(f.markers, p, data, emit); err != nil {
			return c, fmt.Errorf("chunk: %s: %w", name, err)
		}
		return c, nil
	}
	fh, err := os.Open(name)
	if err != nil {
		return c, fmt.Errorf("chunk: %w", err)
	}
	defer fh.Close()
	ch, err := rabin.NewChunker(fh, p)
	if err != nil {
		return c, err
	}
	for {
		k, err := ch.Next()
		if errors.Is(err, io.EOF) {
			return c, nil
		}
		if err != nil {
			return c, fmt.Errorf("chunk: %s: %w", name, err)
		}
		if err := emit(k); err != nil {
			return c, err
		}
	}
}

// markerChunks cuts data into the chunks rabin.Chunker gives, from the
// markers mk computes (its Marker: window rabin.ChunkWindow, mask
// p.AvgBits): a chunk of length L may end where the window ending at its
// byte L−1 is a marker, for L from p.Min to the longest chunk, the first
// such L wins; with none, a full-length chunk or, at the end, the rest.
func markerChunks(mk gpu.Markers, p rabin.ChunkParams, data []byte, emit func(rabin.Chunk) error) error {
	cutter, err := rabin.NewCutter(p)
	if err != nil {
		return err
	}
	t, err := rabin.NewTables(p.Pol, rabin.ChunkWindow)
	if err != nil {
		return err
	}
	marks, err := gpu.StreamMarkers(mk, rabin.ChunkWindow, data, nil)
	if err != nil {
		return err
	}
	limit, mi := cutter.Limit(), 0
	for start := 0; start < len(data); {
		rest := data[start:]
		end := min(len(rest), limit) // candidate lengths p.Min..end
		for mi < len(marks) && int(marks[mi]) < start+p.Min-1 {
			mi++
		}
		var k rabin.Chunk
		switch {
		case mi < len(marks) && int(marks[mi]) <= start+end-1:
			e := int(marks[mi])
			k = rabin.Chunk{Length: e + 1 - start, Cut: t.Fingerprint(data[e+1-rabin.ChunkWindow : e+1])}
		case len(rest) >= limit:
			k = rabin.Chunk{Length: limit, Cut: t.Fingerprint(rest[limit-rabin.ChunkWindow : limit])}
		default:
			k = rabin.Chunk{Length: len(rest), Cut: cutter.LastCut(rest)}
		}
		k.Start, k.Data = int64(start), rest[:k.Length]
		if err := emit(k); err != nil {
			return err
		}
		start += k.Length
	}
	return nil
}

func writeDedup(out io.Writer, name string, c dedupCount, asJSON bool) error {
	pct := 0.0
	if c.Bytes > 0 {
		pct = 100 * float64(c.RepeatedBytes) / float64(c.Bytes)
	}
	if asJSON {
		return json.NewEncoder(out).Encode(struct {
			File           string  `json:"file,omitempty"`
			Total          bool    `json:"total,omitempty"`
			Bytes          int64   `json:"bytes"`
			Chunks         int64   `json:"chunks"`
			RepeatedBytes  int64   `json:"repeated_bytes"`
			RepeatedChunks int64   `json:"repeated_chunks"`
			RepeatedPct    float64 `json:"repeated_pct"`
		}{name, name == "", c.Bytes, c.Chunks, c.RepeatedBytes, c.RepeatedChunks, pct})
	}
	if name == "" {
		name = "total"
	}
	_, err := fmt.Fprintf(out, "%s: %d bytes in %d chunks, %d bytes (%.2f%%) in %d repeated chunks\n",
		name, c.Bytes, c.Chunks, c.RepeatedBytes, pct, c.RepeatedChunks)
	return err
}

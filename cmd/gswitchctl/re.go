package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/rabin"
)

const reUsage = `gswitchctl re markers [--pol HEX] [--window W] [--bits B] [--backend cpu|gpu] [--json] FILE...

Prints each file's marker positions, the file taken as one payload: the
0-based positions i >= W-1 whose window of bytes i-W+1..i has a Rabin
fingerprint (modulo --pol) with its low B bits zero — the anchors redundancy
elimination looks up. Text: "FILE: P1 P2 ..."; --json: {"file": ..., "markers": [...]}.
With --backend gpu (a build with -tags cuda) the markers are computed on GPU 0
(kernels/rabin.cu): the file is cut into 64 KiB payloads, each starting W-1
bytes early, and the positions are the same as the CPU's.
`

func runRE(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "markers" {
		fmt.Fprint(stderr, reUsage)
		return fmt.Errorf("%w: re needs a command: markers", errUsage)
	}
	fs := flag.NewFlagSet("re markers", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, reUsage); fs.PrintDefaults() }
	polText := fs.String("pol", rabin.DefaultPol.String(), "irreducible polynomial over GF(2), degree 53..63 (hexadecimal with 0x)")
	window := fs.Int("window", 32, "window in bytes")
	nbits := fs.Int("bits", 8, "mask bits: a marker where the fingerprint's low B bits are zero (1..32)")
	backend := fs.String("backend", "cpu", "cpu or gpu (a build with -tags cuda)")
	asJSON := fs.Bool("json", false, "one JSON object per file")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: re markers: %v", errUsage, err)
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("%w: re markers: no file given", errUsage)
	}
	if *backend != "cpu" && *backend != "gpu" {
		return fmt.Errorf("%w: re markers: --backend %q: want cpu or gpu", errUsage, *backend)
	}
	pol, err := rabin.ParsePol(*polText, 53, 63)
	if err != nil {
		return fmt.Errorf("%w: re markers: --pol: %v", errUsage, err)
	}
	m, err := rabin.NewMarker(pol, *window, *nbits)
	if err != nil {
		return fmt.Errorf("%w: re markers: %v", errUsage, err)
	}
	var mk gpu.Markers
	if *backend == "gpu" {
		if mk, err = gpu.OpenMarkers("gpu", m); err != nil {
			return fmt.Errorf("re markers: --backend gpu: %w", err)
		}
		defer mk.Close()
	}
	out := bufio.NewWriterSize(stdout, 1<<16)
	defer out.Flush()
	var marks []int32
	for _, name := range fs.Args() {
		data, err := os.ReadFile(name)
		if err != nil {
			return fmt.Errorf("re markers: %w", err)
		}
		if mk != nil {
			if marks, err = gpu.StreamMarkers(mk, m.W, data, marks[:0]); err != nil {
				return fmt.Errorf("re markers: %s: %w", name, err)
			}
		} else {
			marks = m.Markers(marks[:0], data)
		}
		if err := writeMarkers(out, name, marks, *asJSON); err != nil {
			return err
		}
	}
	return nil
}

func writeMarkers(out *bufio.Writer, name string, marks []int32, asJSON bool) error {
	if asJSON {
		if marks == nil {
			marks = []int32{}
		}
		return json.NewEncoder(out).Encode(struct {
			File    string  `json:"file"`
			Markers []int32 `json:"markers"`
		}{name, marks})
	}
	out.WriteString(name)
	out.WriteByte(':')
	var num [12]byte
	for _, p := range marks {
		out.WriteByte(' ')
		out.Write(strconv.AppendInt(num[:0], int64(p), 10))
	}
	return out.WriteByte('\n')
}

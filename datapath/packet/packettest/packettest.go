// Package packettest reads the test corpora of package packet for the tests
// of every package that feeds frames to the datapath (packet, pipeline,
// integration): one reader, one format.
//
// The malformed-frame corpus, datapath/packet/testdata/malformed.txt, holds
// one frame per line: "NAME | REASON | HEX...", where REASON is the text of
// the packet.Reason the parser must give ("ok" for frames that are unusual
// but whole) and HEX is a list of hex strings, each optionally followed by
// *N (repeated N times), "-" standing for nothing. Blank lines and lines
// starting with # are comments.
package packettest

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// Frame is one entry of the malformed-frame corpus.
type Frame struct {
	Name   string // the entry's name, unique in the corpus
	Reason string // the text of the packet.Reason the parser must give
	Frame  []byte // the frame's bytes, from the Ethernet header on
}

// MalformedPath is the corpus's path, found from this source file (tests
// run in the source tree).
func MalformedPath() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata", "malformed.txt")
}

// Malformed reads the malformed-frame corpus, failing tb on any error.
func Malformed(tb testing.TB) []Frame {
	tb.Helper()
	path := MalformedPath()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	frames, err := ParseMalformed(f)
	if err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	return frames
}

// ParseMalformed parses a corpus in the format of the package doc.
func ParseMalformed(r io.Reader) ([]Frame, error) {
	var out []Frame
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for ln := 1; sc.Scan(); ln++ {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		parts := strings.Split(line, " | ")
		if len(parts) != 3 {
			return nil, fmt.Errorf("line %d: want NAME | REASON | HEX, got %q", ln, line)
		}
		var b []byte
		for _, tok := range strings.Fields(parts[2]) {
			if tok == "-" {
				continue
			}
			h, n := tok, 1
			if i := strings.IndexByte(tok, '*'); i >= 0 {
				var err error
				if n, err = strconv.Atoi(tok[i+1:]); err != nil || n < 0 {
					return nil, fmt.Errorf("line %d: %s: bad repeat %q", ln, parts[0], tok)
				}
				h = tok[:i]
			}
			chunk, err := hex.DecodeString(h)
			if err != nil {
				return nil, fmt.Errorf("line %d: %s: %v", ln, parts[0], err)
			}
			for range n {
				b = append(b, chunk...)
			}
		}
		out = append(out, Frame{Name: parts[0], Reason: parts[1], Frame: b})
	}
	return out, sc.Err()
}

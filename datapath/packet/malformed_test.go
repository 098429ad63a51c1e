package packet

import (
	"bufio"
	"encoding/hex"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/gswitch/gswitch/tables/flow"
)

// corpusFrame is one entry of testdata/malformed.txt.
type corpusFrame struct {
	name, reason string
	frame        []byte
}

// readCorpus reads testdata/malformed.txt (its format is in its header).
func readCorpus(t *testing.T, path string) []corpusFrame {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []corpusFrame
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		parts := strings.Split(line, " | ")
		if len(parts) != 3 {
			t.Fatalf("%s: bad line %q", path, line)
		}
		var b []byte
		for _, tok := range strings.Fields(parts[2]) {
			if tok == "-" {
				continue
			}
			h, n := tok, 1
			if i := strings.IndexByte(tok, '*'); i >= 0 {
				if n, err = strconv.Atoi(tok[i+1:]); err != nil {
					t.Fatalf("%s: %s: bad repeat %q", path, parts[0], tok)
				}
				h = tok[:i]
			}
			chunk, err := hex.DecodeString(h)
			if err != nil {
				t.Fatalf("%s: %s: %v", path, parts[0], err)
			}
			for range n {
				b = append(b, chunk...)
			}
		}
		out = append(out, corpusFrame{name: parts[0], reason: parts[1], frame: b})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMalformedCorpus: every frame of testdata/malformed.txt (runts,
// truncated headers, bogus IHL, long IPv6 extension chains, jumbo frames,
// bad VLAN stacks) parses to the reason the corpus names, and none
// crashes Parse or ParseTagged; every reason but OK has a frame.
func TestMalformedCorpus(t *testing.T) {
	corpus := readCorpus(t, "testdata/malformed.txt")
	seen := map[string]bool{}
	var k flow.Key
	for _, c := range corpus {
		r := Parse(&k, c.frame, 1)
		if r.String() != c.reason {
			t.Errorf("%s (%d bytes): Parse says %q, the corpus %q", c.name, len(c.frame), r, c.reason)
		}
		seen[r.String()] = true
		ParseTagged(&k, c.frame, 1, 0x0064) // as if the kernel had removed a tag: must not crash
	}
	for r := Reason(1); r < NumReasons; r++ {
		if !seen[r.String()] {
			t.Errorf("no frame in the corpus for reason %q", r)
		}
	}
}

package packettest

import (
	"bytes"
	"strings"
	"testing"
)

func TestParseMalformed(t *testing.T) {
	in := "# comment\n\nempty | truncated ethernet header | -\nrep | ok | 0a0b*3 0c\n"
	got, err := ParseMalformed(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != "empty" || len(got[0].Frame) != 0 ||
		got[1].Reason != "ok" || !bytes.Equal(got[1].Frame, []byte{10, 11, 10, 11, 10, 11, 12}) {
		t.Fatalf("got %+v", got)
	}
	for _, bad := range []string{"a | b\n", "a | b | zz\n", "a | b | 00*x\n", "a | b | 00*-1\n"} {
		if _, err := ParseMalformed(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}

// TestCorpus: the committed corpus parses and its names are unique.
func TestCorpus(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range Malformed(t) {
		if seen[f.Name] {
			t.Errorf("%s: twice", f.Name)
		}
		seen[f.Name] = true
	}
	if len(seen) < 20 {
		t.Errorf("only %d frames", len(seen))
	}
}

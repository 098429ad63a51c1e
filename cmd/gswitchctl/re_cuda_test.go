//go:build cuda

package main

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCUDAREAndChunkBackends runs gswitchctl re markers and gswitchctl
// chunk with --backend gpu and --backend cpu on the same files and wants the
// same output, byte for byte.
func TestCUDAREAndChunkBackends(t *testing.T) {
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(9, 9))
	random := make([]byte, 5<<20+77)
	for i := range random {
		random[i] = byte(r.Uint32())
	}
	text := []byte(strings.Repeat("GET /index.html HTTP/1.1\r\nHost: h2\r\n\r\n", 40000))
	var names []string
	for n, data := range map[string][]byte{"random": random, "text": text, "short": random[:100], "empty": nil} {
		p := filepath.Join(dir, n)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		names = append(names, p)
	}
	for _, c := range []struct {
		run  func([]string, *bytes.Buffer, *bytes.Buffer) error
		args []string
	}{
		{func(a []string, o, e *bytes.Buffer) error { return runRE(append([]string{"markers"}, a...), o, e) }, []string{"--window", "48", "--bits", "10"}},
		{func(a []string, o, e *bytes.Buffer) error { return runRE(append([]string{"markers"}, a...), o, e) }, []string{"--window", "31", "--bits", "6"}},
		{func(a []string, o, e *bytes.Buffer) error { return runChunk(a, o, e) }, []string{"--min", "4096", "--max", "65536", "--avg-bits", "12"}},
		{func(a []string, o, e *bytes.Buffer) error { return runChunk(a, o, e) }, []string{"--min", "64", "--max", "2000", "--avg-bits", "7", "--json"}},
	} {
		var outs [2]bytes.Buffer
		for i, be := range []string{"cpu", "gpu"} {
			var e bytes.Buffer
			args := append(append(append([]string{}, c.args...), "--backend", be), names...)
			if err := c.run(args, &outs[i], &e); err != nil {
				t.Fatalf("%v: %v (%s)", args, err, e.String())
			}
		}
		if outs[0].Len() == 0 || !bytes.Equal(outs[0].Bytes(), outs[1].Bytes()) {
			t.Fatalf("%v: gpu output (%d bytes) differs from cpu output (%d bytes)", c.args, outs[1].Len(), outs[0].Len())
		}
		t.Logf("%v: %d bytes of output, equal", c.args, outs[0].Len())
	}
}

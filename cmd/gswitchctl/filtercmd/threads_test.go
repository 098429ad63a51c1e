package filtercmd

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gswitch/gswitch/tables/filter"
)

// specsOf parses -e arguments.
func specsOf(args []string) ([]filter.Spec, error) {
	var specs []filter.Spec
	for i := 1; i < len(args); i += 2 {
		s, err := ParseFilterLine(args[i])
		if err != nil {
			return nil, err
		}
		specs = append(specs, s)
	}
	return specs, nil
}

// TestCPUThreads: on every test capture, the CPU backend prints the same
// counts and writes the same pcapng files, byte for byte, on 1 and 3
// goroutines (chunks of 5 packets) and streamed (one goroutine, no
// mapping); the tcpdump tests check the answers themselves.
func TestCPUThreads(t *testing.T) {
	dir := t.TempDir()
	for _, c := range testCaptures(t, dir) {
		args := captureFilters(t, c)
		base := filepath.Join(dir, filepath.Base(c))
		want := runWritten(t, append([]string{"--threads", "1"}, args...), c, base+".t1")
		cpuChunk = 5 // many chunks, walked by 3 goroutines
		got := runWritten(t, append([]string{"--threads", "3"}, args...), c, base+".t3")
		cpuChunk = 0
		if got != want {
			t.Fatalf("%s: --threads 1\n%s\n--threads 3\n%s", c, want, got)
		}
		sameFiles(t, c+" --threads 3", base+".t1", base+".t3")
		// Streamed (a capture that cannot be mapped): one goroutine.
		specs, err := specsOf(args)
		if err != nil {
			t.Fatal(err)
		}
		r, err := NewRunner(specs, base+".stream")
		if err != nil {
			t.Fatal(err)
		}
		if err := r.streamFile(c); err != nil {
			t.Fatal(err)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		var st strings.Builder
		enc := json.NewEncoder(&st)
		for _, x := range r.Results() {
			enc.Encode(x)
		}
		if got := strings.TrimSpace(st.String()) + fmt.Sprintf("\n%d packets", r.packets); got != want {
			t.Fatalf("%s: --threads 1\n%s\nstreamed\n%s", c, want, got)
		}
		sameFiles(t, c+" streamed", base+".t1", base+".stream")
	}
}

package filtercmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gswitch/gswitch/datapath/pcapfile"
	"github.com/gswitch/gswitch/tables/filter"
)

// gpuTestFilters: the CPU tests' filters and more, one of which reads at
// an offset taken from the packet (whole packets on the device).
var gpuTestFilters = append(append([]string(nil), testFilters...), "h1: host 10.0.0.1", "vl: vlan and ip", "ic: icmp or arp",
	"big: len > 100", "net: net 192.168.0.0/16 and udp", "pr: udp portrange 50-60", "ttl: ip[8] < 64",
	"get: tcp[((tcp[12:1] & 0xf0) >> 2):4] = 0x47455420", "v6p: ip6 and tcp port 80")

// testCaptures are the test captures: the filter package's, writeCapture's
// and a pcapng of two link types.
func testCaptures(t *testing.T, dir string) []string {
	caps, err := filepath.Glob("../../../tables/filter/testdata/captures/*.pcap")
	if err != nil || len(caps) == 0 {
		t.Fatalf("no test captures: %v", err)
	}
	caps = append(caps, writeCapture(t, dir))
	// Two link types in one pcapng.
	mixed := filepath.Join(dir, "mixed.pcapng")
	{
		f, _ := os.Create(mixed)
		w, _ := pcapfile.NewWriter(f)
		for _, c := range []string{"test_ethernet.pcap", "test_loopback.pcap", "http.pcap"} {
			for _, p := range readPackets(t, filepath.Join("../../../tables/filter/testdata/captures", c)) {
				if err := w.WritePacket(p); err != nil {
					t.Fatal(err)
				}
			}
		}
		w.Flush()
		f.Close()
	}
	return append(caps, mixed)
}

// captureFilters are the -e arguments of gpuTestFilters that compile for
// every link type of capture c.
func captureFilters(t *testing.T, c string) []string {
	links := map[pcapfile.LinkType]bool{}
	for _, p := range readPackets(t, c) {
		links[p.Link] = true
	}
	var args []string
	for _, e := range gpuTestFilters {
		s, _ := ParseFilterLine(e)
		ok := true
		for l := range links {
			if _, err := filter.CompileOne(s.Expr, uint32(l), false, nil); err != nil {
				ok = false
			}
		}
		if ok {
			args = append(args, "-e", e)
		}
	}
	return args
}

// runWritten runs the command with args over capture in, writing into
// wd, and returns its output but the summary's time.
func runWritten(t *testing.T, args []string, in, wd string) string {
	var out, errb bytes.Buffer
	a := append(append([]string(nil), args...), "--json", "--progress", "never", "--write", wd, in)
	if err := Run(a, &out, &errb); err != nil {
		t.Fatalf("%s %v: %v (%s)", in, args, err, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var sum Summary
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); err != nil || !sum.Summary {
		t.Fatalf("%s: last line %q", in, lines[len(lines)-1])
	}
	return strings.Join(lines[:len(lines)-1], "\n") + fmt.Sprintf("\n%d packets", sum.Packets)
}

// sameFiles wants the pcapng files of directory a in b, byte for byte,
// and returns the packets they hold.
func sameFiles(t *testing.T, what, a, b string) int {
	files, _ := filepath.Glob(filepath.Join(a, "*.pcapng"))
	if len(files) == 0 {
		t.Fatalf("%s: no files written", what)
	}
	n := 0
	for _, f := range files {
		x, _ := os.ReadFile(f)
		y, err := os.ReadFile(filepath.Join(b, filepath.Base(f)))
		if err != nil || !bytes.Equal(x, y) {
			t.Fatalf("%s: %s differs (%v)", what, filepath.Base(f), err)
		}
		n += len(readPackets(t, f))
	}
	return n
}

// compareBackends: on every test capture (and a pcapng of two link
// types), --backend gpu prints the CPU backend's counts and writes the
// same pcapng files, byte for byte.
func compareBackends(t *testing.T) {
	dir := t.TempDir()
	for _, c := range testCaptures(t, dir) {
		args := captureFilters(t, c)
		var outs [2]string
		for i, be := range []string{"cpu", "gpu"} {
			outs[i] = runWritten(t, append([]string{"--backend", be}, args...), c, filepath.Join(dir, filepath.Base(c)+"."+be))
		}
		if outs[0] != outs[1] {
			t.Fatalf("%s: cpu\n%s\ngpu\n%s", c, outs[0], outs[1])
		}
		matched := sameFiles(t, c, filepath.Join(dir, filepath.Base(c)+".cpu"), filepath.Join(dir, filepath.Base(c)+".gpu"))
		t.Logf("%s: %d packets written per backend, equal", filepath.Base(c), matched)
	}
}

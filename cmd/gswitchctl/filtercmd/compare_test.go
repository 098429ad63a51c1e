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

// compareBackends: on every test capture (and a pcapng of two link
// types), --backend gpu prints the CPU backend's counts and writes the
// same pcapng files, byte for byte.
func compareBackends(t *testing.T) {
	dir := t.TempDir()
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
	caps = append(caps, mixed)
	for _, c := range caps {
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
		var outs [2]string
		for i, be := range []string{"cpu", "gpu"} {
			wd := filepath.Join(dir, filepath.Base(c)+"."+be)
			var out, errb bytes.Buffer
			a := append([]string{"--backend", be, "--json", "--progress", "never", "--write", wd}, args...)
			if err := Run(append(a, c), &out, &errb); err != nil {
				t.Fatalf("%s --backend %s: %v (%s)", c, be, err, errb.String())
			}
			// Everything but the summary's time.
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			var sum Summary
			if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); err != nil || !sum.Summary {
				t.Fatalf("%s: last line %q", c, lines[len(lines)-1])
			}
			outs[i] = strings.Join(lines[:len(lines)-1], "\n") + fmt.Sprintf("\n%d packets", sum.Packets)
		}
		if outs[0] != outs[1] {
			t.Fatalf("%s: cpu\n%s\ngpu\n%s", c, outs[0], outs[1])
		}
		files, _ := filepath.Glob(filepath.Join(dir, filepath.Base(c)+".cpu", "*.pcapng"))
		if len(files) == 0 {
			t.Fatalf("%s: no files written", c)
		}
		matched := 0
		for _, f := range files {
			a, _ := os.ReadFile(f)
			b, err := os.ReadFile(filepath.Join(dir, filepath.Base(c)+".gpu", filepath.Base(f)))
			if err != nil || !bytes.Equal(a, b) {
				t.Fatalf("%s: %s differs between the backends (%v)", c, filepath.Base(f), err)
			}
			matched += len(readPackets(t, f))
		}
		t.Logf("%s: %d filters, %d packets written per backend, equal", filepath.Base(c), len(files), matched)
	}
}

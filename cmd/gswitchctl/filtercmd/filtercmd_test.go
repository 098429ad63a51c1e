package filtercmd

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/gswitch/gswitch/datapath/pcapfile"
	"github.com/gswitch/gswitch/tables/filter"
)

func frame(t *testing.T, ls ...gopacket.SerializableLayer) []byte {
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true}, ls...); err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

// writeCapture writes a pcapng of TCP, UDP, ARP and IPv6 frames, some
// truncated, and returns its path.
func writeCapture(t *testing.T, dir string) string {
	eth := func(et layers.EthernetType) *layers.Ethernet {
		return &layers.Ethernet{SrcMAC: net.HardwareAddr{0, 1, 2, 3, 4, 5}, DstMAC: net.HardwareAddr{6, 7, 8, 9, 10, 11}, EthernetType: et}
	}
	ip4 := func(p layers.IPProtocol) *layers.IPv4 {
		return &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: p, SrcIP: net.IP{10, 0, 0, 1}, DstIP: net.IP{10, 0, 0, 2}}
	}
	pay := gopacket.Payload("payload bytes")
	var frames [][]byte
	for i := 0; i < 5; i++ {
		frames = append(frames, frame(t, eth(layers.EthernetTypeIPv4), ip4(layers.IPProtocolTCP),
			&layers.TCP{SrcPort: layers.TCPPort(1000 + i), DstPort: 80, SYN: i == 0}, pay))
	}
	for i := 0; i < 3; i++ {
		frames = append(frames, frame(t, eth(layers.EthernetTypeIPv4), ip4(layers.IPProtocolUDP),
			&layers.UDP{SrcPort: 5353, DstPort: 53}, pay))
	}
	frames = append(frames, frame(t, eth(layers.EthernetTypeARP), &layers.ARP{AddrType: 1, Protocol: 0x800,
		HwAddressSize: 6, ProtAddressSize: 4, Operation: 1, SourceHwAddress: make([]byte, 6),
		SourceProtAddress: []byte{10, 0, 0, 1}, DstHwAddress: make([]byte, 6), DstProtAddress: []byte{10, 0, 0, 2}}))
	frames = append(frames, frame(t, eth(layers.EthernetTypeIPv6), &layers.IPv6{Version: 6, NextHeader: layers.IPProtocolUDP,
		HopLimit: 1, SrcIP: net.ParseIP("2001:db8::1"), DstIP: net.ParseIP("2001:db8::2")}, &layers.UDP{SrcPort: 1, DstPort: 53}, pay))
	path := filepath.Join(dir, "in.pcapng")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := pcapfile.NewWriter(f)
	for i, fr := range frames {
		data := fr
		if i == 3 {
			data = fr[:30] // truncated inside the IPv4 header
		}
		if err := w.WritePacket(pcapfile.Packet{Link: pcapfile.LinkEthernet, Timestamp: int64(i) * 1e6, WireLen: uint32(len(fr)), Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return path
}

var testFilters = []string{"web: tcp port 80", "dns: udp port 53", "arp: arp", "v6: ip6", "syn: tcp[tcpflags] & tcp-syn != 0",
	"all: ", "notweb: not tcp port 80"}

func TestRunCountsEqualTcpdumpAndWrites(t *testing.T) {
	if _, err := exec.LookPath("tcpdump"); err != nil {
		t.Fatal("tcpdump not found: install the Debian package tcpdump")
	}
	dir := t.TempDir()
	in := writeCapture(t, dir)
	args := []string{"--json", "--progress", "never", "--write", filepath.Join(dir, "out")}
	for _, f := range testFilters {
		args = append(args, "-e", f)
	}
	var out, errb bytes.Buffer
	if err := Run(append(args, in), &out, &errb); err != nil {
		t.Fatalf("%v: %s", err, errb.String())
	}
	dec := json.NewDecoder(&out)
	for _, f := range testFilters {
		var r Result
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		spec, _ := ParseFilterLine(f)
		if r.Name != spec.Name || r.Expression != spec.Expr {
			t.Fatalf("result %+v for %q", r, f)
		}
		b, err := exec.Command("tcpdump", "--count", "-r", in, "--", spec.Expr).Output()
		if err != nil {
			t.Fatal(err)
		}
		want, _ := strconv.Atoi(strings.Fields(string(b))[0])
		if int(r.Packets) != want {
			t.Errorf("%s: %d packets, tcpdump %d", r.Name, r.Packets, want)
		}
		// The written capture holds the packets tcpdump -w writes.
		tw := filepath.Join(dir, r.Name+".tcpdump.pcap")
		if err := exec.Command("tcpdump", "-r", in, "-w", tw, "--", spec.Expr).Run(); err != nil {
			t.Fatal(err)
		}
		if got, want := readPackets(t, filepath.Join(dir, "out", r.Name+".pcapng")), readPackets(t, tw); !samePackets(got, want) {
			t.Errorf("%s: wrote %d packets, tcpdump -w %d (or different bytes)", r.Name, len(got), len(want))
		}
	}
	var sum Summary
	if err := dec.Decode(&sum); err != nil || !sum.Summary || sum.Packets != 10 {
		t.Fatalf("summary %+v, %v", sum, err)
	}
}

func readPackets(t *testing.T, path string) []pcapfile.Packet {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapfile.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var ps []pcapfile.Packet
	for {
		p, err := r.Next()
		if err == io.EOF {
			return ps
		}
		if err != nil {
			t.Fatal(err)
		}
		p.Data = append([]byte(nil), p.Data...)
		ps = append(ps, p)
	}
}

func samePackets(a, b []pcapfile.Packet) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i].Data, b[i].Data) || a[i].WireLen != b[i].WireLen || a[i].Timestamp/1000 != b[i].Timestamp/1000 {
			return false
		}
	}
	return true
}

func TestErrorsNameFilterAndPosition(t *testing.T) {
	dir := t.TempDir()
	in := writeCapture(t, dir)
	var out, errb bytes.Buffer
	err := Run([]string{"-e", "ok: tcp", "-e", "bad: tcp port 80 and host", in}, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "filter bad: position 20") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("got %v", err)
	}
	if out.Len() != 0 {
		t.Fatalf("printed %q before failing", out.String())
	}
	for _, args := range [][]string{{in}, {"-e", "x: tcp"}, {"-e", "no colon", in}, {"--backend", "tpu", "-e", "x: tcp", in}} {
		if err := Run(args, &out, &errb); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

func TestReadFilters(t *testing.T) {
	specs, err := ReadFilters(strings.NewReader("# monitoring\n\nweb: tcp port 80\n  dns.v4 : udp port 53  \n"), "f")
	if err != nil || len(specs) != 2 || specs[1].Name != "dns.v4" || specs[1].Expr != "udp port 53" {
		t.Fatalf("%+v %v", specs, err)
	}
	if _, err := ReadFilters(strings.NewReader("web tcp\n"), "f"); err == nil || !strings.Contains(err.Error(), "f:1") {
		t.Fatalf("got %v", err)
	}
}

// TestTruncatedFileIsAnError: a capture cut inside a record is an error
// naming the file (as tcpdump's "truncated dump file"), after its whole
// packets were counted.
func TestTruncatedFileIsAnError(t *testing.T) {
	path := filepath.Join("..", "..", "..", "datapath", "pcapfile", "testdata", "truncated_dns_2.pcap")
	r, err := NewRunner([]filter.Spec{{Name: "all", Expr: ""}}, "")
	if err != nil {
		t.Fatal(err)
	}
	err = r.File(path)
	if err == nil || !strings.Contains(err.Error(), "truncated_dns_2.pcap") || r.Results()[0].Packets != 1 {
		t.Fatalf("error %v, %d packets", err, r.Results()[0].Packets)
	}
}

// TestRunBPFPrograms: filters given as tcpdump -ddd programs, inline and
// from a file named in the filters file, count what tcpdump counts for
// their expressions.
func TestRunBPFPrograms(t *testing.T) {
	if _, err := exec.LookPath("tcpdump"); err != nil {
		t.Fatal("tcpdump not found: install the Debian package tcpdump")
	}
	dir := t.TempDir()
	in := writeCapture(t, dir)
	exprs := map[string]string{"web": "tcp port 80", "dns": "udp port 53", "v6": "ip6", "syn": "tcp[tcpflags] & tcp-syn != 0"}
	var lines []string
	for name, e := range exprs {
		prog, err := exec.Command("tcpdump", "-ddd", "-r", in, "--", e).Output()
		if err != nil {
			t.Fatal(err)
		}
		if name == "web" || name == "v6" { // from a file beside the filters file
			if err := os.WriteFile(filepath.Join(dir, name+".bpf"), prog, 0o644); err != nil {
				t.Fatal(err)
			}
			lines = append(lines, name+": bpf:@"+name+".bpf")
			continue
		}
		lines = append(lines, name+": bpf:"+strings.Join(strings.Split(strings.TrimSpace(string(prog)), "\n"), ","))
	}
	ff := filepath.Join(dir, "filters")
	if err := os.WriteFile(ff, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if err := Run([]string{"--json", "--progress", "never", "--filters", ff, in}, &out, &errb); err != nil {
		t.Fatalf("%v: %s", err, errb.String())
	}
	dec := json.NewDecoder(&out)
	for range exprs {
		var r Result
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		b, err := exec.Command("tcpdump", "--count", "-r", in, "--", exprs[r.Name]).Output()
		if err != nil {
			t.Fatal(err)
		}
		want, _ := strconv.Atoi(strings.Fields(string(b))[0])
		if int(r.Packets) != want || !strings.HasPrefix(r.Expression, "bpf:") {
			t.Errorf("%s (%s): %d packets, tcpdump %d", r.Name, r.Expression, r.Packets, want)
		}
	}
	// A missing file and a bad program are one-line errors naming the filter.
	for _, e := range []string{"x: bpf:@nope.bpf", "x: bpf:2,6 0 0 1"} {
		err := Run([]string{"--progress", "never", "-e", e, in}, &out, &errb)
		if err == nil || !strings.HasPrefix(err.Error(), "filter x: position ") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: %v", e, err)
		}
	}
}

package filter

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// oracleExprs is the differential corpus: every expression is run through
// tcpdump --count and through this package on every generated capture.
var oracleExprs = []string{
	"", "ip", "ip6", "arp", "rarp", "tcp", "udp", "icmp", "icmp6", "sctp", "igmp", "pim", "vrrp", "ah", "esp",
	"not ip", "!tcp", "ip or arp", "ip and not udp", "tcp or udp or icmp", "not (tcp or udp)", "ip && tcp || arp",
	"ether host 00:11:22:33:44:55", "ether src 00:11:22:33:44:55", "ether dst 66:77:88:99:aa:bb",
	"ether dst ff:ff:ff:ff:ff:ff", "ether src or dst 66:77:88:99:aa:bb", "ether src and dst 00:11:22:33:44:55",
	"ether host 0011.2233.4455", "ether host 00-11-22-33-44-55",
	"ether proto 0x0800", "ether proto 0x86dd", "ether proto 0x88b5", "ether proto 0x42", "ether proto \\arp",
	"ether proto \\ip6", "ether proto 2048", "ether broadcast", "ether multicast", "broadcast", "multicast",
	"ip broadcast", "ip multicast", "ip6 multicast",
	"host 10.0.0.1", "src host 10.0.0.1", "dst host 10.0.0.2", "host 10.0.0.1 or 192.168.1.5",
	"host 10.0.0.1 and 10.0.0.2", "src 10.0.0.1", "dst 10.0.0.2", "host 10.0.0.1 and not 10.0.0.2",
	"ip host 10.0.0.1", "arp host 10.0.0.1", "rarp host 192.168.1.5", "ip src or dst host 10.0.0.2",
	"src and dst host 10.0.0.1", "host 2001:db8::1", "ip6 src host 2001:db8::1", "dst host 2001:db8::2",
	"host 10.0.0.1 or 2001:db8::2", "net 10.0.0.0/8", "net 10.0.0.0/24", "src net 192.168.0.0/16",
	"net 10.0.0.0 mask 255.0.0.0", "net 10", "net 192.168", "dst net 224.0.0.0/4", "net 0.0.0.0/0",
	"net 2001:db8::/32", "src net 2001:db8::/64", "net ::/0", "host 10.0.0", "host 10",
	"port 80", "tcp port 80", "udp port 53", "src port 1234", "dst port 80", "tcp dst port 80",
	"port 80 or port 443", "port 80 or 443", "tcp port 80 and host 10.0.0.1", "host 10.0.0.1 and port 80",
	"sctp port 80", "port 5000", "udp port 5000", "port domain", "tcp port http", "port http or https",
	"udp port bootps", "portrange 50-90", "tcp portrange 1000-2000", "udp src portrange 60-70",
	"portrange 1-1024", "src or dst port 80", "src and dst port 5353", "not port 80", "not tcp port 80",
	"port 0x50", "port 0120", "proto 6", "ip proto 17", "ip6 proto 6", "ip6 proto 17", "proto 132",
	"ip proto 47", "ip6 proto 58", "ip proto \\tcp", "ip proto \\udp", "proto \\icmp", "ip6 proto \\ipv6-icmp",
	"ip proto gre", "ip proto 0x11",
	"less 60", "greater 100", "len < 60", "len >= 100", "len = 68", "len - 14 > 50", "less 100 and tcp",
	"tcp[13] = 2", "tcp[tcpflags] & tcp-syn != 0", "tcp[tcpflags] & (tcp-syn|tcp-ack) = tcp-ack",
	"tcp[13] & 0x12 = 0x12", "icmp[icmptype] = icmp-echo", "icmp[icmptype] != icmp-echo and icmp[icmptype] != icmp-echoreply",
	"icmp[0] = 8", "icmp6[icmp6type] = icmp6-echo", "icmp6[0] = 128", "ip[9] = 6", "ip[0] & 0xf > 5",
	"ip[0] & 0xf != 5", "ip[2:2] > 40", "ip[6:2] & 0x1fff != 0", "ip6[6] = 44", "ip6[40] = 17",
	"ether[12:2] = 0x0800", "ether[0] & 1 = 1", "ether[0:4] = 0xffffffff", "ether[14] = 0x45",
	"tcp[0:2] = 80 or tcp[2:2] = 80", "udp[0:2] = 5353", "udp[2:2] = 53", "tcp[12] >> 4 > 5",
	"tcp[((tcp[12] & 0xf0) >> 2)] = 0x68", "ip[2:2] - ((ip[0] & 0xf) << 2) > 20", "ether[len - 1] = 0",
	"tcp[100] = 1", "not tcp[100] = 1", "tcp[100] = 1 or tcp", "ip[40:4] = 0", "not ip[40:4] = 0",
	"arp[6:2] = 1", "arp[7] = 3", "rarp[7] = 3", "ip[1] + ip[8] > 64", "ip[8] * 2 = 128", "ip[8] / 2 = 32",
	"ip[8] % 5 = 4", "ip[8] ^ 0xff = 0xbf", "ip[8] | 1 = 65", "-ip[8] = -64", "ip[8] - 1 = 63",
	"ip[8] % 3 + 1 = 2", "2 + 3 * ip[8] = 194", "1 = 1", "1 = 2", "ip[8] / ip[9] = 10", "ether[0] / (ether[1] - ether[1]) = 0",
	"tcp[0] << 33 = 0", "tcp[0] << (tcp[1] & 0x3f) = 0", "ip[8] >> (ip[9] + 30) = 0", "sctp[2:2] = 8080", "udp[4:2] > 20", "igmp[0] = 0", "pim[0] = 0x20", "vrrp[0] = 0",
	"vlan", "vlan 100", "vlan 101", "vlan 200", "vlan and vlan", "vlan 200 and vlan 300", "vlan and ip",
	"vlan and tcp port 80", "vlan 100 and host 10.0.0.1", "vlan or ip", "ip or vlan", "vlan and not ip",
	"not vlan", "vlan 5 and vlan 6 and tcp", "vlan and vlan and udp", "vlan 100 or vlan 101",
	"vlan and arp", "vlan and ip6", "vlan and (tcp or udp)", "(vlan) and ip",
	"mpls", "mpls 1000", "mpls 2000", "mpls and ip", "mpls 1000 and mpls 2000", "mpls and mpls and ip",
	"mpls and tcp", "mpls and ip6", "mpls 1000 and host 10.0.0.1", "mpls and udp port 53", "mpls or ip",
	"not mpls", "mpls and vlan",
	"ip and (tcp or udp) and not port 53", "(host 10.0.0.1 or host 10.0.0.2) and tcp", "host 10.0.0.1 and (port 80 or 1234)",
	"tcp and (src port 80 or dst port 80)", "not (host 10.0.0.1 and port 80)", "ether src 00:11:22:33:44:55 and not arp",
	"vlan 0", "net 0.0.0.0/8", "not net 0.0.0.0/8", "ip6 net 2001:db8::/48", "ip6 dst net ff02::/16",
	"icmp6[icmp6type] = icmp6-neighborsolicit", "icmp6 and ip6[40] = 128", "ip[6] & 0x20 != 0",
	"ip[6:2] & 0x1fff = 0 and udp", "udp and ip[6:2] & 0x3fff != 0", "tcp[tcpflags] = tcp-syn",
	"tcp[tcpflags] & (tcp-rst|tcp-fin) != 0", "ether[6:4] = 0x00112233", "ether src 0:11:22:33:44:55",
	"len <= 64", "len != 60", "greater 1000", "less 0", "ip[2:2] * 8 > len * 4", "tcp[0:4] >> 16 = 80",
	"tcp[0:4] & 0xffff = 80", "tcp[2:2] - tcp[0:2] > 0", "(ip[0] & 0xf) * 4 = 24", "udp[8:4] = 0x68656c6c",
	"vlan 100 and vlan", "vlan and mpls", "mpls 1000 and mpls 2000 and udp port 5000", "(vlan 100 or vlan 101) and tcp",
	"not vlan 100 and ip", "vlan and mpls and ip", "vlan 100 and mpls 3000 and tcp port 80",
	"vlan and vlan and mpls 1000 and mpls 2000 and udp", "vlan and mpls and ip6", "mpls or vlan and mpls", "portrange 0-65535", "portrange 90-50", "dst portrange 79-81", "tcp src portrange 1234-1234",
	"port 80 and not src port 80", "host 10.0.0.1 and host 10.0.0.2", "src host 10.0.0.1 or dst host 10.0.0.1",
	"ether host 00:11:22:33:44:55 or ether host 66:77:88:99:aa:bb", "ip proto 132 or ip6 proto 132",
	"sctp and port 80", "pim or vrrp or igmp", "ip proto 50 or ip proto 51", "ah or esp", "ip proto \\esp",
	"0x50 = tcp[2:2]", "80 = tcp[2:2] or 53 = udp[2:2]", "ether[12:2] > 0x0600", "ether[12:2] <= 1500",
	"ip multicast or ip6 multicast or ether broadcast",
	// rejected by libpcap
	"tcp or 80", "host", "port 70000", "foo", "ip proto tcp", "10.0.0.1", "tcp[0:3] = 1", "ip[0] / 0 = 1",
	"tcp[0] << 32 = 1", "vlan 5000", "mpls 2000000", "net 10.0.0.1/8", "host 10.0.0.0/8", "port 10.0.0.1",
	"tcp proto 6", "src proto 6", "host 300.1.1.1", "arp proto 6", "(tcp", "tcp)", "tcp and", "not", "tcp port",
	"port 65536", "ether host 10.0.0.1", "host 00:11:22:33:44:55", "udp port http", "tcp port bootps",
	"icmp port 80", "09", "0x", "ip6 host 10.0.0.1", "ip host 2001:db8::1", "net 2001:db8::1/32",
	"len > 10 or", "ether[0:]", "tcp[]", "net 10.0.0.0/33", "less", "vlan 1 and mpls 1 and vlan 2",
	"mpls and arp",
}

// linkFile is one generated capture.
type linkFile struct {
	name      string
	link      uint32
	bigEndian bool
	pkts      []testPacket
}

func writePcap(path string, link uint32, bigEndian bool, pkts []testPacket) error {
	var order binary.ByteOrder = binary.LittleEndian
	if bigEndian {
		order = binary.BigEndian
	}
	var b bytes.Buffer
	h := make([]byte, 24)
	order.PutUint32(h, 0xa1b2c3d4)
	order.PutUint16(h[4:], 2)
	order.PutUint16(h[6:], 4)
	order.PutUint32(h[16:], 262144)
	order.PutUint32(h[20:], link)
	b.Write(h)
	for i, p := range pkts {
		r := make([]byte, 16)
		order.PutUint32(r, uint32(1700000000+i))
		order.PutUint32(r[8:], uint32(len(p.data)))
		order.PutUint32(r[12:], p.wire)
		b.Write(r)
		b.Write(p.data)
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// rewrap turns the Ethernet corpus into captures of the other link types.
func rewrap(eth []testPacket) []linkFile {
	files := []linkFile{{name: "en10mb", link: LinkEthernet, pkts: eth}}
	conv := func(name string, link uint32, be bool, hdr func(et uint16, i int) []byte, keep func(et uint16) bool) {
		lf := linkFile{name: name, link: link, bigEndian: be}
		for i, p := range eth {
			if len(p.data) < 14 {
				continue
			}
			et := binary.BigEndian.Uint16(p.data[12:])
			if keep != nil && !keep(et) {
				continue
			}
			h := hdr(et, i)
			d := append(append([]byte(nil), h...), p.data[14:]...)
			lf.pkts = append(lf.pkts, testPacket{d, p.wire - 14 + uint32(len(h))})
		}
		files = append(files, lf)
	}
	af := func(et uint16, i int) uint32 {
		switch et {
		case 0x0800:
			return 2
		case 0x86dd:
			return []uint32{24, 28, 30, 10}[i%4]
		}
		return 7
	}
	conv("sll", LinkLinuxSLL, false, func(et uint16, i int) []byte {
		h := []byte{0, 0, 0, 1, 0, 6, 0, 0x11, 0x22, 0x33, 0x44, 0x55, 0, 0, 0, 0}
		return binary.BigEndian.AppendUint16(h, et)
	}, nil)
	conv("sll2", LinkLinuxSLL2, false, func(et uint16, i int) []byte {
		h := binary.BigEndian.AppendUint16(nil, et)
		return append(h, 0, 0, 0, 0, 0, 2, 0, 1, 0, 6, 0, 0x11, 0x22, 0x33, 0x44, 0x55, 0, 0)
	}, nil)
	conv("raw", LinkRaw, false, func(uint16, int) []byte { return nil }, nil)
	conv("ipv4", LinkIPv4, false, func(uint16, int) []byte { return nil }, func(et uint16) bool { return et == 0x0800 })
	conv("ipv6", LinkIPv6, false, func(uint16, int) []byte { return nil }, func(et uint16) bool { return et == 0x86dd })
	conv("null-le", LinkNull, false, func(et uint16, i int) []byte { return binary.LittleEndian.AppendUint32(nil, af(et, i)) }, nil)
	conv("null-be", LinkNull, true, func(et uint16, i int) []byte { return binary.BigEndian.AppendUint32(nil, af(et, i)) }, nil)
	conv("loop", LinkLoop, false, func(et uint16, i int) []byte { return binary.BigEndian.AppendUint32(nil, af(et, i)) }, nil)
	return files
}

var outSeq atomic.Int64

// tcpdumpPackets runs tcpdump -w and returns the packets it writes; ok is
// false when tcpdump rejects the expression.
func tcpdumpPackets(t *testing.T, file, expr string) ([]testPacket, bool, string) {
	// Not beside the input: other packages' tests list the captures
	// folder. tcpdump run as root writes as its own user (-Z), so the
	// folder (and the test's temporary parent) must let it in.
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, fmt.Sprintf("out-%d.pcap", outSeq.Add(1)))
	defer os.Remove(out)
	cmd := exec.Command("tcpdump", "-n", "-r", file, "-w", out, "--", expr)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Run(); err != nil {
		return nil, false, strings.TrimSpace(errb.String())
	}
	lf, err := readPcap(out)
	if err != nil {
		t.Fatalf("tcpdump -w %s %q: %v", file, expr, err)
	}
	return lf.pkts, true, ""
}

// samePacketList reports whether the packets at indices ours are theirs.
func samePacketList(all []testPacket, ours []int, theirs []testPacket) bool {
	for k, i := range ours {
		if !bytes.Equal(all[i].data, theirs[k].data) || all[i].wire != theirs[k].wire {
			return false
		}
	}
	return true
}

var countRE = regexp.MustCompile(`(?m)^(\d+) packets?$`)

// tcpdumpCount runs tcpdump --count; ok is false when tcpdump rejects the
// expression.
func tcpdumpCount(t *testing.T, file, expr string) (int, bool, string) {
	cmd := exec.Command("tcpdump", "--count", "-n", "-r", file, "--", expr)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		return 0, false, strings.TrimSpace(errb.String())
	}
	m := countRE.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("tcpdump --count -r %s %q: no count in %q", file, expr, out.String())
	}
	n, _ := strconv.Atoi(m[1])
	return n, true, ""
}

func requireTcpdump(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("tcpdump"); err != nil {
		t.Fatal("tcpdump not found: install the Debian package tcpdump (the oracle of this test), and netbase for /etc/services and /etc/protocols")
	}
	if _, err := os.Stat("/etc/services"); err != nil {
		t.Fatal("/etc/services missing: install the Debian package netbase")
	}
}

func ourCount(expr string, lf linkFile) (int, error) {
	m, err := ourMatches(expr, lf)
	return len(m), err
}

// ourMatches returns the indices of the packets the expression accepts.
func ourMatches(expr string, lf linkFile) ([]int, error) {
	prog, err := CompileOne(expr, lf.link, lf.bigEndian, nil)
	if err != nil {
		return nil, err
	}
	ev := NewEvaluator(prog)
	le, err := NewLayoutEvaluator(prog.Layout())
	if err != nil {
		return nil, err
	}
	var matches []int
	var stages [1]uint64
	for i, p := range lf.pkts {
		m := ev.Match(p.data, p.wire)
		if m {
			matches = append(matches, i)
		}
		// The three-stage (device) form and its word layout must agree
		// packet by packet.
		if ev.EvalStages(p.data, p.wire, stages[:]); (stages[0]&1 == 1) != m {
			return nil, fmt.Errorf("three-stage evaluation %v, control flow %v on a packet of %d bytes", !m, m, len(p.data))
		}
		if le.Eval(p.data, p.wire, stages[:]); (stages[0]&1 == 1) != m {
			return nil, fmt.Errorf("layout interpreter %v, control flow %v on a packet of %d bytes", !m, m, len(p.data))
		}
	}
	return matches, nil
}

// TestOracleTcpdump compares every expression's count on every generated
// capture with tcpdump's, and rejections with tcpdump's rejections.
func TestOracleTcpdump(t *testing.T) {
	requireTcpdump(t)
	dir := t.TempDir()
	files := rewrap(ethernetCorpus())
	for i := range files {
		files[i].name = filepath.Join(dir, files[i].name+".pcap")
		if err := writePcap(files[i].name, files[i].link, files[i].bigEndian, files[i].pkts); err != nil {
			t.Fatal(err)
		}
	}
	runOracle(t, files, oracleExprs)
}

// TestOracleRealCaptures does the same on the real captures of
// testdata/captures (see SOURCES.md there).
func TestOracleRealCaptures(t *testing.T) {
	requireTcpdump(t)
	paths, _ := filepath.Glob(filepath.Join("testdata", "captures", "*.pcap"))
	if len(paths) == 0 {
		t.Fatal("no captures in testdata/captures")
	}
	var files []linkFile
	for _, p := range paths {
		lf, err := readPcap(p)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, lf)
	}
	runOracle(t, files, oracleExprs)
}

// readPcap reads a classic pcap file (the test's own small reader: tables
// packages import no datapath package).
func readPcap(path string) (linkFile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return linkFile{}, err
	}
	lf := linkFile{name: path}
	if len(b) < 24 {
		return lf, fmt.Errorf("%s: short file", path)
	}
	var order binary.ByteOrder = binary.LittleEndian
	switch {
	case binary.LittleEndian.Uint32(b) == 0xa1b2c3d4 || binary.LittleEndian.Uint32(b) == 0xa1b23c4d:
	case binary.BigEndian.Uint32(b) == 0xa1b2c3d4 || binary.BigEndian.Uint32(b) == 0xa1b23c4d:
		order, lf.bigEndian = binary.BigEndian, true
	default:
		return lf, fmt.Errorf("%s: not a classic pcap file", path)
	}
	lf.link = order.Uint32(b[20:]) & 0x03ffffff
	for off := 24; off+16 <= len(b); {
		n := int(order.Uint32(b[off+8:]))
		wire := order.Uint32(b[off+12:])
		if off+16+n > len(b) {
			return lf, fmt.Errorf("%s: truncated record", path)
		}
		lf.pkts = append(lf.pkts, testPacket{b[off+16 : off+16+n], wire})
		off += 16 + n
	}
	return lf, nil
}

func runOracle(t *testing.T, files []linkFile, exprs []string) {
	type job struct {
		lf   linkFile
		expr string
	}
	jobs := make(chan job)
	var mu sync.Mutex
	var fails []string
	checked, rejected := 0, 0
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				theirs, ok, msg := tcpdumpPackets(t, j.lf.name, j.expr)
				want := len(theirs)
				ours, err := ourMatches(j.expr, j.lf)
				got := len(ours)
				mu.Lock()
				checked++
				switch {
				case ok && err == nil && got == want && !samePacketList(j.lf.pkts, ours, theirs):
					fails = append(fails, fmt.Sprintf("%s %q: %d packets as tcpdump, but not the same ones", filepath.Base(j.lf.name), j.expr, got))
				case !ok && err == nil:
					fails = append(fails, fmt.Sprintf("%s %q: tcpdump rejects (%s), we accept (count %d)", filepath.Base(j.lf.name), j.expr, msg, got))
				case ok && err != nil:
					fails = append(fails, fmt.Sprintf("%s %q: tcpdump counts %d, we reject: %v", filepath.Base(j.lf.name), j.expr, want, err))
				case ok && got != want:
					fails = append(fails, fmt.Sprintf("%s %q: tcpdump counts %d, we count %d", filepath.Base(j.lf.name), j.expr, want, got))
				case !ok:
					rejected++
				}
				mu.Unlock()
			}
		}()
	}
	for _, lf := range files {
		for _, e := range exprs {
			jobs <- job{lf, e}
		}
	}
	close(jobs)
	wg.Wait()
	for _, f := range fails {
		t.Error(f)
	}
	t.Logf("%d (file, expression) pairs checked against tcpdump, %d rejected by both, %d disagreements", checked, rejected, len(fails))
}

// TestOracleCount checks the counts against tcpdump --count itself (the
// other oracle tests compare the packets tcpdump -w writes).
func TestOracleCount(t *testing.T) {
	requireTcpdump(t)
	dir := t.TempDir()
	for _, lf := range rewrap(ethernetCorpus())[:3] {
		lf.name = filepath.Join(dir, lf.name+".pcap")
		if err := writePcap(lf.name, lf.link, lf.bigEndian, lf.pkts); err != nil {
			t.Fatal(err)
		}
		for _, e := range []string{"tcp port 80", "not udp", "vlan and ip", "host 10.0.0.1 or 10.0.0.2", "tcp[100] = 1 or tcp"} {
			want, ok, msg := tcpdumpCount(t, lf.name, e)
			got, err := ourCount(e, lf)
			if ok != (err == nil) || got != want {
				t.Errorf("%s %q: tcpdump --count %d (%s), ours %d (%v)", lf.name, e, want, msg, got, err)
			}
		}
	}
}

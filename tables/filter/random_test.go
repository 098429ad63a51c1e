package filter

import (
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// randomPrims are the leaves of TestOracleRandom's expressions; bare
// values ("80", "10.0.0.2") exercise qualifier elision and its errors.
var randomPrims = []string{
	"tcp", "udp", "ip", "ip6", "arp", "rarp", "icmp", "icmp6", "sctp", "vlan", "vlan 100", "vlan 300", "mpls",
	"mpls 1000", "host 10.0.0.1", "src 10.0.0.2", "dst host 192.168.1.5", "port 80", "src port 1234",
	"tcp dst port 80", "udp port 53", "portrange 50-100", "net 10.0.0.0/8", "net 192.168", "ip6 host 2001:db8::1",
	"ip broadcast", "ip multicast", "ether multicast", "ether broadcast", "ether src 00:11:22:33:44:55",
	"ether dst 66:77:88:99:aa:bb", "tcp[13] & 2 != 0", "tcp[tcpflags] & tcp-ack = 0", "ip[8] > 60",
	"ip[2:2] < 60", "less 80", "greater 60", "len > 100", "icmp[0] = 8", "ip proto 17", "ip6 proto 58",
	"proto 6", "udp[100] = 0", "tcp[50:2] != 1", "ether[20] = 0", "ip[0] & 0xf > 5", "80", "53", "1234",
	"10.0.0.2", "2001:db8::2", "ether proto 0x86dd", "ip6 multicast", "ether[0] & 1 = 0", "ip6[6] = 6",
}

func randomExpr(r *rand.Rand, depth int) string {
	if depth == 0 || r.Intn(10) < 4 {
		return randomPrims[r.Intn(len(randomPrims))]
	}
	switch r.Intn(8) {
	case 0:
		return "not " + randomExpr(r, depth-1)
	case 1:
		return "!" + randomExpr(r, depth-1)
	case 2, 3:
		return "(" + randomExpr(r, depth-1) + ")"
	}
	op := []string{" and ", " or ", " && ", " || "}[r.Intn(4)]
	return randomExpr(r, depth-1) + op + randomExpr(r, depth-1)
}

// TestOracleRandom compares random combinations of primitives (with
// and/or precedence, not, parentheses, elided qualifiers, VLAN and MPLS
// offset shifts) with tcpdump on the generated Ethernet, SLL2 and raw IP
// captures (truncated packets included).
func TestOracleRandom(t *testing.T) {
	requireTcpdump(t)
	n := 400
	if testing.Short() {
		n = 60
	}
	seed := int64(20261125)
	if s := os.Getenv("GSWITCH_FILTER_SEED"); s != "" {
		seed, _ = strconv.ParseInt(s, 10, 64)
		if m, err := strconv.Atoi(os.Getenv("GSWITCH_FILTER_N")); err == nil {
			n = m
		}
	}
	r := rand.New(rand.NewSource(seed))
	seen := map[string]bool{}
	var exprs []string
	for len(exprs) < n {
		e := randomExpr(r, 4)
		if !seen[e] && len(strings.Fields(e)) > 2 {
			seen[e] = true
			exprs = append(exprs, e)
		}
	}
	dir := t.TempDir()
	var files []linkFile
	for _, lf := range rewrap(ethernetCorpus()) {
		if lf.name == "en10mb" || lf.name == "sll2" || lf.name == "raw" {
			lf.name = filepath.Join(dir, lf.name+".pcap")
			if err := writePcap(lf.name, lf.link, lf.bigEndian, lf.pkts); err != nil {
				t.Fatal(err)
			}
			files = append(files, lf)
		}
	}
	runOracle(t, files, exprs)
}

package filter

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestMemoKeyDecides: a packet changed where its memo key does not look
// (bytes outside the plan, the wire length when no criterion reads it)
// gets the same answers from Eval; changed where the key looks, the key
// changes. Random mutations of the corpus, truncations included, for a
// monitoring set, a set with len tests and IPv4-relative loads, and
// single filters.
func TestMemoKeyDecides(t *testing.T) {
	sets := [][]Spec{
		benchSpecs(200),
		{{"a", "less 100 or greater 1400"}, {"b", "tcp[tcpflags] & tcp-syn != 0"}, {"c", "udp dst port 53 and ip[8] < 64"},
			{"d", "icmp[icmptype] = icmp-echo"}, {"e", "vlan 2 and tcp port 80"}, {"f", "ip6 and tcp"}, {"g", "ether host 02:00:00:00:00:01"},
			{"h", "ip[6:2] & 0x1fff = 0 and udp[4:2] > 20"}},
		{{"x", "tcp port 80"}},
	}
	r := rand.New(rand.NewPCG(7, 8))
	corpus := ethernetCorpus()
	checked, keyed := 0, 0
	for si, specs := range sets {
		p, err := Compile(specs, LinkEthernet, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		ev := NewEvaluator(p)
		want := make([]uint64, p.Words())
		got := make([]uint64, p.Words())
		for _, pk := range corpus {
			for range 40 {
				a := slices.Clone(pk.data)
				if len(a) > 0 && r.IntN(4) == 0 {
					a = a[:r.IntN(len(a))]
				}
				wa := pk.wire
				ka, ok := p.MemoKey(nil, a, wa)
				if !ok {
					t.Fatalf("set %d: no memo key", si)
				}
				b := slices.Clone(a)
				wb := wa
				switch r.IntN(5) {
				case 0:
					wb = wa + uint32(r.IntN(100))
				case 1: // zeros appended: the bytes a load past the end would read
					b = append(b, make([]byte, 1+r.IntN(40))...)
				case 2: // cut shorter
					b = b[:r.IntN(len(b)+1)]
				default:
					for range 1 + r.IntN(3) {
						if len(b) > 0 {
							b[r.IntN(len(b))] ^= byte(1 + r.IntN(255))
						}
					}
				}
				kb, _ := p.MemoKey(nil, b, wb)
				ev.Eval(a, wa, want)
				ev.Eval(b, wb, got)
				checked++
				if bytes.Equal(ka, kb) {
					keyed++
					if !slices.Equal(want, got) {
						t.Fatalf("set %d: equal keys, different answers\n a %x wire %d\n b %x wire %d", si, a, wa, b, wb)
					}
				}
			}
		}
	}
	if keyed < checked/10 || keyed == checked {
		t.Fatalf("%d of %d mutations kept the key: the test does not test", keyed, checked)
	}
	t.Logf("%d mutations, %d kept the key", checked, keyed)
}

// TestMemoKeyNoneForComputedOffsets: a load at a computed offset needs the
// whole packet: no key.
func TestMemoKeyNoneForComputedOffsets(t *testing.T) {
	p, err := Compile([]Spec{{"v", "tcp[tcp[12] >> 4] = 1"}}, LinkEthernet, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.MemoKey(nil, make([]byte, 80), 80); ok {
		t.Fatal("a memo key for a computed offset")
	}
}

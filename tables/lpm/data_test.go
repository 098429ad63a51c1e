package lpm

import (
	"bytes"
	"compress/gzip"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadPrefixes(t *testing.T) {
	good := "# a comment\n\n10.0.0.0/8\n  2001:db8::/32  \n\t# indented comment\n0.0.0.0/0\n::/0\n1.2.3.4/32\n"
	ps, err := ReadPrefixes(strings.NewReader(good), "good")
	mustOK(t, err)
	want := []string{"10.0.0.0/8", "2001:db8::/32", "0.0.0.0/0", "::/0", "1.2.3.4/32"}
	if len(ps) != len(want) {
		t.Fatalf("got %v", ps)
	}
	for i, p := range ps {
		if p.String() != want[i] {
			t.Errorf("line %d: %v, want %s", i, p, want[i])
		}
	}
	bad := []struct{ text, where string }{
		{"10.0.0.0/8\n10.0.0.1/8\n", "bad:2:"},
		{"10.0.0.0/33\n", "bad:1:"},
		{"\n\n10.0.0.0/8 extra\n", "bad:3:"},
		{"10.0.0.0\n", "bad:1:"},
		{"# ok\nnot a prefix\n", "bad:2:"},
		{"2001:db8::1/32\n", "bad:1:"},
		{"fe80::/10%eth0\n", "bad:1:"},
		{strings.Repeat("1", 70000) + "\n", "bad:1:"},
	}
	for _, c := range bad {
		_, err := ReadPrefixes(strings.NewReader(c.text), "bad")
		if err == nil || !strings.HasPrefix(err.Error(), c.where) {
			t.Errorf("%.30q: error %v, want prefix %q", c.text, err, c.where)
		}
	}
}

func TestOpenPrefixFile(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "p.txt")
	mustOK(t, os.WriteFile(plain, []byte("10.0.0.0/8\n"), 0o644))
	var buf bytes.Buffer
	z := gzip.NewWriter(&buf)
	z.Write([]byte("2001:db8::/32\n"))
	z.Close()
	gz := filepath.Join(dir, "p.txt.gz")
	mustOK(t, os.WriteFile(gz, buf.Bytes(), 0o644))
	for path, want := range map[string]string{plain: "10.0.0.0/8", gz: "2001:db8::/32"} {
		ps, err := OpenPrefixFile(path)
		mustOK(t, err)
		if len(ps) != 1 || ps[0].String() != want {
			t.Errorf("%s: %v", path, ps)
		}
	}
	if _, err := OpenPrefixFile(filepath.Join(dir, "missing")); err == nil {
		t.Errorf("missing file: no error")
	}
	notGzip := filepath.Join(dir, "x.gz")
	mustOK(t, os.WriteFile(notGzip, []byte("10.0.0.0/8\n"), 0o644))
	if _, err := OpenPrefixFile(notGzip); err == nil {
		t.Errorf("a .gz that is not gzip: no error")
	}
}

func TestTrafficGenerators(t *testing.T) {
	ps := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8::/48"), netip.MustParsePrefix("1.2.3.4/32")}
	addrs := TableAddrs(ps, 3000, 1)
	seen := map[netip.Prefix]int{}
	for _, a := range addrs {
		in := 0
		for _, p := range ps {
			if p.Contains(a) {
				in++
				seen[p]++
			}
		}
		if in != 1 {
			t.Fatalf("%v is in %d of the prefixes", a, in)
		}
	}
	for _, p := range ps {
		if seen[p] < 800 {
			t.Errorf("%v drawn %d times of 3000", p, seen[p])
		}
	}
	for _, fam := range []Family{IPv4, IPv6} {
		r := RandomAddrs(fam, 1000, 2)
		if len(r) != 1000 || familyOf(r[0]) != fam || r[0] == r[1] {
			t.Errorf("RandomAddrs(%v): %v", fam, r[:2])
		}
		if again := RandomAddrs(fam, 1000, 2); again[999] != r[999] {
			t.Errorf("RandomAddrs is not deterministic")
		}
	}
	if TableAddrs(nil, 10, 1) != nil || len(RandomAddrs(IPv4, -1, 1)) != 0 {
		t.Errorf("empty inputs")
	}
}

func TestSyntheticNextHop(t *testing.T) {
	counts := map[uint32]int{}
	g := newPrefixGen(IPv6, 1)
	for i := 0; i < 5000; i++ {
		p := g.prefix()
		nh := SyntheticNextHop(p)
		if nh < 1 || nh > 256 || nh != SyntheticNextHop(p) {
			t.Fatalf("%v -> %d", p, nh)
		}
		counts[nh]++
	}
	if len(counts) < 200 {
		t.Errorf("only %d distinct next hops", len(counts))
	}
	a, b := netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("10.0.0.0/9")
	if SyntheticNextHop(a) == SyntheticNextHop(b) && SyntheticNextHop(a) == SyntheticNextHop(netip.MustParsePrefix("10.0.0.0/10")) {
		t.Errorf("the length does not enter the hash")
	}
}

// TestUpdateTrace checks the trace's promises: deterministic, every
// withdrawal names a present prefix and every announcement a withdrawn one,
// the pool cap, next hops in range, and the length mix of the withdrawals.
func TestUpdateTrace(t *testing.T) {
	g := newPrefixGen(IPv4, 2)
	var ps []netip.Prefix
	for i := 0; i < 3000; i++ {
		ps = append(ps, g.prefix())
	}
	uniq := Dedupe(ps)
	trace := UpdateTrace(ps, 20000, 5)
	if again := UpdateTrace(ps, 20000, 5); again[19999] != trace[19999] {
		t.Fatalf("not deterministic")
	}
	present := map[netip.Prefix]bool{}
	for _, p := range uniq {
		present[p] = true
	}
	withdrawn, changes := 0, 0
	lenWithdrawn := map[int]int{}
	for i, u := range trace {
		if u.Withdraw {
			if !present[u.Prefix] {
				t.Fatalf("update %d withdraws absent %v", i, u.Prefix)
			}
			present[u.Prefix] = false
			withdrawn++
			lenWithdrawn[u.Prefix.Bits()]++
			continue
		}
		if present[u.Prefix] {
			t.Fatalf("update %d re-announces present %v", i, u.Prefix)
		}
		present[u.Prefix] = true
		withdrawn--
		if u.NextHop < 1 || u.NextHop > 256 {
			t.Fatalf("next hop %d", u.NextHop)
		}
		if u.NextHop != SyntheticNextHop(u.Prefix) {
			changes++
		}
		if withdrawn > max(1, len(uniq)/100) {
			t.Fatalf("pool over its cap: %d", withdrawn)
		}
	}
	if changes == 0 {
		t.Errorf("no next-hop changes")
	}
	lenAll := map[int]int{}
	for _, p := range uniq {
		lenAll[p.Bits()]++
	}
	total := 0
	for _, n := range lenWithdrawn {
		total += n
	}
	for l, n := range lenAll {
		share, got := float64(n)/float64(len(uniq)), float64(lenWithdrawn[l])/float64(total)
		if share > 0.05 && (got < share*0.7 || got > share*1.3) {
			t.Errorf("length /%d: %.3f of the table, %.3f of the withdrawals", l, share, got)
		}
	}
	if UpdateTrace(nil, 5, 1) != nil {
		t.Errorf("trace of an empty table")
	}
}

func TestNextHops(t *testing.T) {
	var nhs NextHops
	a := NextHop{Gateway: netip.MustParseAddr("192.0.2.1"), Port: 1}
	b := NextHop{Gateway: netip.MustParseAddr("2001:db8::1"), Port: 2}
	c := NextHop{Port: 3}
	ia, err := nhs.Acquire(a)
	mustOK(t, err)
	ib, _ := nhs.Acquire(b)
	ia2, _ := nhs.Acquire(a)
	if ia != 1 || ib != 2 || ia2 != ia || nhs.Len() != 2 {
		t.Fatalf("ids %d %d %d, Len %d", ia, ib, ia2, nhs.Len())
	}
	if got, ok := nhs.Get(ib); !ok || got != b {
		t.Fatalf("Get(%d) = %v, %v", ib, got, ok)
	}
	nhs.Release(ia)
	if _, ok := nhs.Get(ia); !ok {
		t.Fatalf("released one of two references and the id is gone")
	}
	nhs.Release(ia)
	if _, ok := nhs.Get(ia); ok || nhs.Len() != 1 {
		t.Fatalf("id %d still in use", ia)
	}
	nhs.Release(ia) // no effect
	nhs.Release(0)
	nhs.Release(99)
	ic, _ := nhs.Acquire(c)
	if ic != ia {
		t.Errorf("freed id %d not reused (got %d)", ia, ic)
	}
	if _, ok := nhs.Get(0); ok {
		t.Errorf("id 0 is in use")
	}
	// Fill up to the limit cheaply: pretend the id space is nearly used.
	full := NextHops{vals: make([]NextHop, MaxNextHop), refs: make([]uint32, MaxNextHop)}
	if _, err := full.Acquire(a); !errors.Is(err, ErrFull) {
		t.Errorf("full table: %v", err)
	}
}

func TestReference(t *testing.T) {
	r := NewReference(IPv4)
	if err := r.Insert(netip.MustParsePrefix("2001:db8::/32"), 1); !errors.Is(err, ErrFamily) {
		t.Errorf("wrong family: %v", err)
	}
	if err := r.Insert(netip.PrefixFrom(netip.MustParseAddr("10.0.0.1"), 8), 1); !errors.Is(err, ErrInvalidPrefix) {
		t.Errorf("host bits: %v", err)
	}
	if err := r.Delete(netip.MustParsePrefix("10.0.0.0/8")); !errors.Is(err, ErrNotFound) {
		t.Errorf("absent: %v", err)
	}
	mustOK(t, r.Insert(netip.MustParsePrefix("10.0.0.0/8"), 1))
	mustOK(t, r.Insert(netip.MustParsePrefix("10.1.0.0/16"), 2))
	if nh, _ := r.Lookup(netip.MustParseAddr("10.1.2.3")); nh != 2 {
		t.Errorf("lookup: %d", nh)
	}
	if nh, ok := r.Lookup(netip.MustParseAddr("11.1.2.3")); ok || nh != 0 {
		t.Errorf("lookup outside: %d", nh)
	}
}

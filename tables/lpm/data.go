package lpm

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"os"
	"strings"
)

// ReadPrefixes reads one CIDR prefix per line. Blank lines and lines whose
// first non-blank character is '#' are skipped; surrounding blanks are
// ignored. Anything else that is not exactly one valid, masked prefix (bad
// syntax, host bits set, a trailing field) stops the read with the error
// "name:line: reason".
func ReadPrefixes(r io.Reader, name string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || text[0] == '#' {
			continue
		}
		p, err := parsePrefixLine(text)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", name, line, err)
		}
		out = append(out, p)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %v", name, line+1, err)
	}
	return out, nil
}

func parsePrefixLine(text string) (netip.Prefix, error) {
	if f := strings.Fields(text); len(f) != 1 {
		return netip.Prefix{}, fmt.Errorf("want one prefix, found %d fields", len(f))
	}
	p, err := netip.ParsePrefix(text)
	if err != nil {
		return netip.Prefix{}, err
	}
	if p.Masked() != p {
		return netip.Prefix{}, fmt.Errorf("%v has host bits set", p)
	}
	return p, nil
}

// OpenPrefixFile reads a prefix file (see ReadPrefixes), gunzipping it when
// the name ends in ".gz".
func OpenPrefixFile(path string) ([]netip.Prefix, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		z, err := gzip.NewReader(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		defer z.Close()
		r = z
	}
	return ReadPrefixes(r, path)
}

// SplitFamilies returns the IPv4 and the IPv6 prefixes of ps.
func SplitFamilies(ps []netip.Prefix) (v4, v6 []netip.Prefix) {
	for _, p := range ps {
		if p.Addr().Is4() {
			v4 = append(v4, p)
		} else {
			v6 = append(v6, p)
		}
	}
	return v4, v6
}

func newRand(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
}

// RandomAddrs returns n addresses of family fam drawn uniformly from the whole
// address space, deterministic for a seed.
func RandomAddrs(fam Family, n int, seed uint64) []netip.Addr {
	rng := newRand(seed)
	out := make([]netip.Addr, max(n, 0))
	for i := range out {
		out[i] = addrFromBits(fam, rng.Uint64(), rng.Uint64())
	}
	return out
}

// TableAddrs returns n addresses of "in-table traffic": each is drawn
// uniformly inside a prefix drawn uniformly from prefixes. It returns nil if
// prefixes is empty.
func TableAddrs(prefixes []netip.Prefix, n int, seed uint64) []netip.Addr {
	if len(prefixes) == 0 || n <= 0 {
		return nil
	}
	rng := newRand(seed)
	out := make([]netip.Addr, n)
	for i := range out {
		p := prefixes[rng.IntN(len(prefixes))].Masked()
		hi, lo := addrBits(p.Addr())
		mh, ml := maskBits(^uint64(0), ^uint64(0), p.Bits())
		hi |= rng.Uint64() &^ mh
		lo |= rng.Uint64() &^ ml
		out[i] = addrFromBits(familyOf(p.Addr()), hi, lo)
	}
	return out
}

// addrFromBits makes an address from left-aligned bits.
func addrFromBits(fam Family, hi, lo uint64) netip.Addr {
	if fam == IPv4 {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(hi>>32))
		return netip.AddrFrom4(b)
	}
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], hi)
	binary.BigEndian.PutUint64(b[8:], lo)
	return netip.AddrFrom16(b)
}

// SyntheticNextHop maps a prefix to a stable next hop in 1..256 (FNV-1a over
// its address bytes and length), for benchmarks and tests that need next hops
// for a prefix list.
func SyntheticNextHop(p netip.Prefix) uint32 {
	var buf [17]byte
	b := buf[:0]
	if p.Addr().Is4() {
		a := p.Addr().As4()
		b = append(b, a[:]...)
	} else {
		a := p.Addr().As16()
		b = append(b, a[:]...)
	}
	b = append(b, byte(p.Bits()))
	h := uint64(14695981039346656037)
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return uint32(h%256) + 1
}

// Update is one route change of a trace: a withdrawal, or an announcement
// (new route or next-hop change).
type Update struct {
	Withdraw bool
	Prefix   netip.Prefix
	NextHop  uint32
}

// UpdateTraceDescription says how UpdateTrace derives its updates; benchmarks
// print it beside their figures.
const UpdateTraceDescription = "update trace derived from the table: the prefix list is deduplicated and " +
	"taken as fully announced, each prefix with SyntheticNextHop; withdrawn prefixes wait in a pool capped " +
	"at max(1, 1% of the table); each update is a withdrawal of a prefix drawn uniformly from those announced " +
	"when the pool is empty, a re-announcement of a prefix drawn uniformly from the pool when it is full, " +
	"and either with probability 1/2 otherwise; a re-announcement carries the prefix's synthetic next hop, " +
	"or with probability 1/4 another one drawn uniformly from the other 255 of 1..256 (a next-hop change); " +
	"withdrawals are uniform over the table, so the updates keep the table's prefix-length mix; " +
	"deterministic for a seed (PCG)"

// UpdateTrace returns n updates derived from prefixes as
// UpdateTraceDescription says. Applied in order to a table built from
// prefixes with SyntheticNextHop, every withdrawal names a present prefix. It
// returns nil if prefixes is empty.
func UpdateTrace(prefixes []netip.Prefix, n int, seed uint64) []Update {
	uniq := Dedupe(prefixes)
	if len(uniq) == 0 || n <= 0 {
		return nil
	}
	rng := newRand(seed)
	announced := newPool(len(uniq), true)
	withdrawn := newPool(len(uniq), false)
	capacity := max(1, len(uniq)/100)
	out := make([]Update, n)
	for i := range out {
		withdraw := withdrawn.len() == 0 ||
			(withdrawn.len() < capacity && announced.len() > 0 && rng.IntN(2) == 0)
		if withdraw {
			x := announced.take(rng)
			withdrawn.add(x)
			out[i] = Update{Withdraw: true, Prefix: uniq[x]}
			continue
		}
		x := withdrawn.take(rng)
		announced.add(x)
		p := uniq[x]
		nh := SyntheticNextHop(p)
		if rng.IntN(4) == 0 {
			nh = (nh-1+1+uint32(rng.IntN(255)))%256 + 1
		}
		out[i] = Update{Prefix: p, NextHop: nh}
	}
	return out
}

// Dedupe returns ps without repeats, in first-seen order.
func Dedupe(ps []netip.Prefix) []netip.Prefix {
	seen := make(map[netip.Prefix]bool, len(ps))
	out := make([]netip.Prefix, 0, len(ps))
	for _, p := range ps {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// pool is a set of indices with uniform random removal in O(1).
type pool struct {
	items []int32
	pos   []int32 // index -> position in items, -1 when absent
}

func newPool(n int, full bool) *pool {
	p := &pool{pos: make([]int32, n)}
	for i := range p.pos {
		p.pos[i] = -1
		if full {
			p.add(int32(i))
		}
	}
	return p
}

func (p *pool) len() int { return len(p.items) }

func (p *pool) add(x int32) {
	p.pos[x] = int32(len(p.items))
	p.items = append(p.items, x)
}

// take removes and returns a uniformly drawn item (the pool is not empty).
func (p *pool) take(rng *rand.Rand) int32 {
	i := rng.IntN(len(p.items))
	x := p.items[i]
	last := p.items[len(p.items)-1]
	p.items[i], p.pos[last] = last, int32(i)
	p.items = p.items[:len(p.items)-1]
	p.pos[x] = -1
	return x
}

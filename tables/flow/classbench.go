package flow

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
)

// CBRule is one ClassBench filter: source and destination prefixes, port
// ranges, protocol and TCP flags with masks. Rules are ranked by position:
// the first rule that matches a header wins.
type CBRule struct {
	Src, Dst                                   uint32
	SrcLen, DstLen                             uint8
	SrcPortLo, SrcPortHi, DstPortLo, DstPortHi uint16
	Proto, ProtoMask                           uint8
	Flags, FlagsMask                           uint16
	// Line is the rule's line in its file (1-based).
	Line int
}

// CBHeader is a 5-tuple packet header with TCP flags, as ClassBench's
// trace generator writes them.
type CBHeader struct {
	Src, Dst         uint32
	SrcPort, DstPort uint16
	Proto            uint8
	Flags            uint16
}

// Matches reports whether h matches r with ClassBench's semantics: prefixes,
// inclusive port ranges, protocol and flags under their masks.
func (r *CBRule) Matches(h *CBHeader) bool {
	return h.Src&prefixMask32(int(r.SrcLen)) == r.Src &&
		h.Dst&prefixMask32(int(r.DstLen)) == r.Dst &&
		r.SrcPortLo <= h.SrcPort && h.SrcPort <= r.SrcPortHi &&
		r.DstPortLo <= h.DstPort && h.DstPort <= r.DstPortHi &&
		h.Proto&r.ProtoMask == r.Proto &&
		h.Flags&r.FlagsMask == r.Flags
}

// CBFirstMatch returns the index of the first rule matching h, or -1.
func CBFirstMatch(rules []CBRule, h *CBHeader) int {
	for i := range rules {
		if rules[i].Matches(h) {
			return i
		}
	}
	return -1
}

// Key returns the packet key of an IPv4 packet with this header: eth_type,
// ip_proto, addresses, the port word (for ICMP its type and code) and
// tcp_flags.
func (h *CBHeader) Key() Key {
	var k Key
	_ = k.SetUint(FieldEthType, EthTypeIPv4)
	_ = k.SetUint(FieldIPProto, uint64(h.Proto))
	_ = k.SetUint(FieldIPv4Src, uint64(h.Src))
	_ = k.SetUint(FieldIPv4Dst, uint64(h.Dst))
	_ = k.SetUint(FieldTCPSrc, uint64(h.SrcPort))
	_ = k.SetUint(FieldTCPDst, uint64(h.DstPort))
	_ = k.SetUint(FieldTCPFlags, uint64(h.Flags))
	return k
}

// CBHeaderOf reads a header back from a packet key made by Key.
func CBHeaderOf(k *Key) CBHeader {
	return CBHeader{
		Src: uint32(k.GetUint(FieldIPv4Src)), Dst: uint32(k.GetUint(FieldIPv4Dst)),
		SrcPort: uint16(k.GetUint(FieldTCPSrc)), DstPort: uint16(k.GetUint(FieldTCPDst)),
		Proto: uint8(k.GetUint(FieldIPProto)), Flags: uint16(k.GetUint(FieldTCPFlags)),
	}
}

func prefixMask32(n int) uint32 { return uint32(prefixOnes(32, n).lo) }

// maxCBLine bounds a ClassBench line.
const maxCBLine = 4096

// ReadClassBench reads a ClassBench filter set:
//
//	@src/len<TAB>dst/len<TAB>lo : hi<TAB>lo : hi<TAB>0xPP/0xMM[<TAB>0xFFFF/0xMMMM]
//
// (the flags field is optional, blank lines are skipped, trailing tabs
// allowed). Any malformed line is an error "name:line: reason": an address
// that is not a dotted quad, a prefix length beyond 32 or host bits set, a
// port beyond 65535 or a range with lo > hi, a protocol mask other than 0x00
// or 0xFF, value bits outside a mask, missing or extra fields. It also
// rejects the filters OpenFlow cannot express: TCP flags without protocol 6,
// port ranges without protocol TCP, UDP or SCTP.
func ReadClassBench(r io.Reader, name string) ([]CBRule, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), maxCBLine)
	var rules []CBRule
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimRight(sc.Text(), " \t\r")
		if strings.TrimSpace(text) == "" {
			continue
		}
		cb, err := parseCBLine(text)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", name, line, err)
		}
		cb.Line = line
		rules = append(rules, cb)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%s:%d: line longer than %d bytes", name, line+1, maxCBLine)
		}
		return nil, fmt.Errorf("%s:%d: %v", name, line+1, err)
	}
	return rules, nil
}

func parseCBLine(s string) (CBRule, error) {
	var r CBRule
	if !strings.HasPrefix(s, "@") {
		return r, errors.New("a filter starts with @")
	}
	fields := strings.Split(s[1:], "\t")
	if len(fields) < 5 || len(fields) > 6 {
		return r, fmt.Errorf("%d tab-separated fields, want 5 or 6", len(fields))
	}
	var err error
	if r.Src, r.SrcLen, err = parseCBPrefix(fields[0]); err != nil {
		return r, fmt.Errorf("source: %v", err)
	}
	if r.Dst, r.DstLen, err = parseCBPrefix(fields[1]); err != nil {
		return r, fmt.Errorf("destination: %v", err)
	}
	if r.SrcPortLo, r.SrcPortHi, err = parseCBRange(fields[2]); err != nil {
		return r, fmt.Errorf("source ports: %v", err)
	}
	if r.DstPortLo, r.DstPortHi, err = parseCBRange(fields[3]); err != nil {
		return r, fmt.Errorf("destination ports: %v", err)
	}
	v, m, err := parseCBMasked(fields[4], 8)
	if err != nil {
		return r, fmt.Errorf("protocol: %v", err)
	}
	if m != 0 && m != 0xff {
		return r, fmt.Errorf("protocol mask %#x: want 0x00 or 0xFF", m)
	}
	r.Proto, r.ProtoMask = uint8(v), uint8(m)
	if len(fields) == 6 {
		v, m, err := parseCBMasked(fields[5], 16)
		if err != nil {
			return r, fmt.Errorf("flags: %v", err)
		}
		r.Flags, r.FlagsMask = uint16(v), uint16(m)
	}
	return r, r.expressible()
}

// expressible checks that OpenFlow can express the rule.
func (r *CBRule) expressible() error {
	exact := func(p uint8) bool { return r.ProtoMask == 0xff && r.Proto == p }
	if r.FlagsMask != 0 && !exact(IPProtoTCP) {
		return fmt.Errorf("TCP flags %#04x/%#04x need protocol 6 (tcp_flags requires ip_proto=6)", r.Flags, r.FlagsMask)
	}
	ports := r.SrcPortLo != 0 || r.SrcPortHi != 0xffff || r.DstPortLo != 0 || r.DstPortHi != 0xffff
	if ports && !exact(IPProtoTCP) && !exact(IPProtoUDP) && !exact(IPProtoSCTP) {
		return fmt.Errorf("port ranges with protocol %#02x/%#02x: OpenFlow matches ports only for TCP, UDP or SCTP", r.Proto, r.ProtoMask)
	}
	return nil
}

func parseCBPrefix(s string) (uint32, uint8, error) {
	addr, plen, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return 0, 0, fmt.Errorf("%q: want a.b.c.d/len", s)
	}
	octets := strings.Split(addr, ".")
	if len(octets) != 4 {
		return 0, 0, fmt.Errorf("%q: not a dotted quad", addr)
	}
	var a uint32
	for _, o := range octets {
		x, err := strconv.ParseUint(o, 10, 8)
		if err != nil || o == "" || o[0] == '+' {
			return 0, 0, fmt.Errorf("%q: octet %q not in 0..255", addr, o)
		}
		a = a<<8 | uint32(x)
	}
	n, err := strconv.ParseUint(plen, 10, 8)
	if err != nil || n > 32 {
		return 0, 0, fmt.Errorf("%q: prefix length %q not in 0..32", s, plen)
	}
	if a&^prefixMask32(int(n)) != 0 {
		return 0, 0, fmt.Errorf("%q: host bits set beyond /%d", s, n)
	}
	return a, uint8(n), nil
}

func parseCBRange(s string) (uint16, uint16, error) {
	a, b, ok := strings.Cut(s, ":")
	if !ok {
		return 0, 0, fmt.Errorf("%q: want lo : hi", s)
	}
	lo, err1 := strconv.ParseUint(strings.TrimSpace(a), 10, 16)
	hi, err2 := strconv.ParseUint(strings.TrimSpace(b), 10, 16)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("%q: ports must be 0..65535", s)
	}
	if lo > hi {
		return 0, 0, fmt.Errorf("%q: range with lo > hi", s)
	}
	return uint16(lo), uint16(hi), nil
}

// parseCBMasked reads 0xVALUE/0xMASK of at most bits bits.
func parseCBMasked(s string, bits int) (uint64, uint64, error) {
	a, b, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return 0, 0, fmt.Errorf("%q: want 0xVALUE/0xMASK", s)
	}
	v, err1 := parseHex(a, bits)
	m, err2 := parseHex(b, bits)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("%q: want hexadecimal 0xVALUE/0xMASK of %d bits", s, bits)
	}
	if v&^m != 0 {
		return 0, 0, fmt.Errorf("%q: value bits outside the mask", s)
	}
	return v, m, nil
}

func parseHex(s string, bits int) (uint64, error) {
	if !strings.HasPrefix(s, "0x") && !strings.HasPrefix(s, "0X") {
		return 0, errors.New("no 0x")
	}
	return strconv.ParseUint(s[2:], 16, bits)
}

// ExpandClassBench turns ClassBench filters into flow rules: eth_type=0x0800,
// the prefixes, ip_proto when the protocol mask is 0xFF, tcp_flags under
// their mask, and each port range expanded into prefixes (value/mask), one
// rule per pair of source and destination prefixes. Rule i of the input gets
// priority 65535-i (0 from the 65536th on: then the lower RuleID, i.e. the
// earlier rule when they are added in order, wins as in ClassBench), and
// Cookie and Action = i, the index of the filter it came from. Filters that
// OpenFlow cannot express (see ReadClassBench) are an error.
func ExpandClassBench(rules []CBRule) ([]Rule, error) {
	var out []Rule
	for i := range rules {
		cb := &rules[i]
		if err := cb.expressible(); err != nil {
			return nil, fmt.Errorf("filter %d (line %d): %v", i, cb.Line, err)
		}
		var base Match
		base.SetEthType(EthTypeIPv4)
		if cb.ProtoMask == 0xff {
			base.SetIPProto(cb.Proto)
		}
		if err := errors.Join(base.SetIPv4Src(cb.Src, int(cb.SrcLen)), base.SetIPv4Dst(cb.Dst, int(cb.DstLen))); err != nil {
			return nil, fmt.Errorf("filter %d (line %d): %v", i, cb.Line, err)
		}
		if cb.FlagsMask != 0 {
			if err := base.SetTCPFlags(cb.Flags&cb.FlagsMask, cb.FlagsMask); err != nil {
				return nil, fmt.Errorf("filter %d (line %d): %v", i, cb.Line, err)
			}
		}
		prio := uint16(max(0, 65535-i))
		for _, sp := range RangePrefixes(cb.SrcPortLo, cb.SrcPortHi) {
			for _, dp := range RangePrefixes(cb.DstPortLo, cb.DstPortHi) {
				m := base
				_ = m.SetL4Src(sp[0], sp[1])
				_ = m.SetL4Dst(dp[0], dp[1])
				out = append(out, Rule{Match: m, Priority: prio, Cookie: uint64(i), Action: uint32(i)})
			}
		}
	}
	return out, nil
}

// RangePrefixes returns the fewest value/mask pairs whose union is the port
// range lo..hi (a single {0, 0} wildcard for the full range).
func RangePrefixes(lo, hi uint16) [][2]uint16 {
	var out [][2]uint16
	for l, h := uint32(lo), uint32(hi); l <= h; {
		size := uint32(1)
		for l&(2*size-1) == 0 && l+2*size-1 <= h {
			size *= 2
		}
		out = append(out, [2]uint16{uint16(l), uint16(^(size - 1))})
		l += size
	}
	return out
}

// ClassBenchTraffic returns n packet keys in the style of ClassBench's
// trace_generator: nine in ten are headers drawn inside a random rule (an
// address in each prefix, ports in each range, often at its ends, the
// rule's protocol and flags or random ones where it has wildcards), one in
// ten uniform random headers (protocol TCP, UDP, ICMP or random). Non-TCP
// headers have no flags.
func ClassBenchTraffic(rules []CBRule, n int, seed uint64) []Key {
	rng := rand.New(rand.NewPCG(seed, 0xc1a55be4c4))
	keys := make([]Key, max(n, 0))
	for i := range keys {
		var h CBHeader
		if len(rules) == 0 || rng.IntN(10) == 0 {
			h = CBHeader{Src: rng.Uint32(), Dst: rng.Uint32(), SrcPort: uint16(rng.Uint32()), DstPort: uint16(rng.Uint32()), Proto: randProto(rng)}
			if h.Proto == IPProtoTCP {
				h.Flags = uint16(rng.Uint32())
			}
		} else {
			h = cbHeaderIn(rng, &rules[rng.IntN(len(rules))])
		}
		keys[i] = h.Key()
	}
	return keys
}

func randProto(rng *rand.Rand) uint8 {
	switch rng.IntN(4) {
	case 0:
		return IPProtoTCP
	case 1:
		return IPProtoUDP
	case 2:
		return IPProtoICMP
	}
	return uint8(rng.Uint32())
}

// cbHeaderIn returns a header inside rule r.
func cbHeaderIn(rng *rand.Rand, r *CBRule) CBHeader {
	h := CBHeader{
		Src:     r.Src | rng.Uint32()&^prefixMask32(int(r.SrcLen)),
		Dst:     r.Dst | rng.Uint32()&^prefixMask32(int(r.DstLen)),
		SrcPort: portIn(rng, r.SrcPortLo, r.SrcPortHi),
		DstPort: portIn(rng, r.DstPortLo, r.DstPortHi),
		Proto:   r.Proto | randProto(rng)&^r.ProtoMask,
	}
	if h.Proto == IPProtoTCP {
		h.Flags = r.Flags | uint16(rng.Uint32())&^r.FlagsMask
	}
	return h
}

func portIn(rng *rand.Rand, lo, hi uint16) uint16 {
	switch rng.IntN(4) {
	case 0:
		return lo
	case 1:
		return hi
	}
	return lo + uint16(rng.IntN(int(hi)-int(lo)+1))
}

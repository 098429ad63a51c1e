package forward

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"sync"

	"github.com/gswitch/gswitch/datapath/packet"
	"github.com/gswitch/gswitch/tables/flow"
)

// The traffic of a rule set (--ruleset synthetic or classbench): per pair,
// --flows frame templates, each a 60-byte frame (64 on the wire) whose
// header is drawn inside a random rule of the set that the pair's port may
// match: a random base header (unicast MACs, IPv4, TCP, UDP, ICMP or a
// random protocol, random addresses, ports and TCP flags) with the rule's
// matched bits laid over it, so the frames hit the rules uniformly and
// every template is a different header (no per-flow cache helps while
// --flows is large). The generator sends the templates in order, over and
// over. What the rules do with each template is known in advance: the
// template is parsed by the datapath's own key extractor, looked up in a
// tuple-space table of the same rules (the oracle) and its rule's
// instruction read off (goto_table:1: it leaves by the pair's other port;
// none, or no rule: dropped).
//
// Each frame carries an 8-byte mark, the step number XOR a magic and the
// frame's sequence number (32 bits), so that a ring sink can tell which
// template every frame it receives came from: in a TCP frame the mark is
// the sequence and acknowledgement numbers (no rule matches them), in
// every other frame the last 8 bytes.

// frameSet is one pair's templates and what the rules do with them.
type frameSet struct {
	tmpl    [][]byte
	markOff []int    // the mark's offset in each template; nil: the trivial traffic's payload stamp
	fwd     []bool   // template i's frames leave by the pair's sink port
	fwdUpTo []uint64 // fwdUpTo[i]: forwarded templates among 0..i-1 (len(tmpl)+1 entries)
}

// trivialFrames is the trivial rule set's traffic: one template per source
// port, every one forwarded, stamped in its payload.
func trivialFrames(dst, src []byte, srcPorts int) *frameSet {
	fs := &frameSet{tmpl: make([][]byte, srcPorts)}
	for i := range fs.tmpl {
		fs.tmpl[i] = testFrame(dst, src, uint16(udpSrcPort0+i))
	}
	return fs
}

// forwardedPct is the share of the pairs' templates, in percent, that the
// rules (or the subscriptions) send on.
func forwardedPct(fsets []*frameSet) float64 {
	var fwd, n uint64
	for _, fs := range fsets {
		fwd += fs.expected(uint64(len(fs.tmpl)))
		n += uint64(len(fs.tmpl))
	}
	return 100 * float64(fwd) / float64(n)
}

// forwardAll is the same traffic for a target without rules (plain, the
// bridge): every frame is forwarded.
func (fs *frameSet) forwardAll() *frameSet {
	return &frameSet{tmpl: fs.tmpl, markOff: fs.markOff}
}

// expected returns how many of the first n frames sent (templates in
// order, from 0) the rules forward; all of them for the trivial traffic.
func (fs *frameSet) expected(n uint64) uint64 {
	if fs.fwdUpTo == nil {
		return n
	}
	t := uint64(len(fs.tmpl))
	return n/t*fs.fwdUpTo[t] + fs.fwdUpTo[n%t]
}

// stamp fills frame f (a copy of template i) with step and sequence number.
func (fs *frameSet) stamp(f []byte, i int, step uint32, seq uint64) {
	if fs.markOff == nil {
		stamp(f, step, seq)
		return
	}
	o := fs.markOff[i]
	binary.BigEndian.PutUint32(f[o:], benchMagic^step)
	binary.BigEndian.PutUint32(f[o+4:], uint32(seq))
}

// markOf finds the mark of a received rule-set frame (the kernel may have
// removed its VLAN tag): the step and sequence number, false if the frame
// is no IPv4 frame of the bench's shape.
func markOf(d []byte) (step uint32, seq uint32, ok bool) {
	off := 12
	for off+4 <= len(d) && (binary.BigEndian.Uint16(d[off:]) == 0x8100 || binary.BigEndian.Uint16(d[off:]) == 0x88a8) {
		off += 4
	}
	if off+2+20 > len(d) || binary.BigEndian.Uint16(d[off:]) != 0x0800 {
		return 0, 0, false
	}
	ip := off + 2
	l4 := ip + int(d[ip]&15)*4
	o := len(d) - 8
	if d[ip+9] == flow.IPProtoTCP {
		o = l4 + 4
	}
	if o < l4 || o+8 > len(d) {
		return 0, 0, false
	}
	return binary.BigEndian.Uint32(d[o:]) ^ benchMagic, binary.BigEndian.Uint32(d[o+4:]), true
}

// ruleFrames builds pair k's templates (n, a power of two) for rule set rs,
// with oracle the rules in a tuple-space table and id2rule its ids' rule
// indices. The frames' MACs are the rules' or random (see randomKey), not
// the generator's.
func ruleFrames(rs *ruleSet, oracle *flow.Table, id2rule map[flow.RuleID]int, k, n int) (*frameSet, error) {
	rng := rand.New(rand.NewPCG(rulesetSeed+1, uint64(k)))
	inPort := uint32(2*k + 1)
	fs := &frameSet{tmpl: make([][]byte, n), markOff: make([]int, n), fwd: make([]bool, n), fwdUpTo: make([]uint64, n+1)}
	keys := make([]flow.Key, n)
	for i := range n {
		r := &rs.rules[rs.eligible[k][rng.IntN(len(rs.eligible[k]))]]
		base := randomKey(rng, inPort)
		var hk flow.Key
		for w := range hk {
			hk[w] = base[w]&^r.Match.Mask[w] | r.Match.Value[w]&r.Match.Mask[w]
		}
		fs.tmpl[i], fs.markOff[i] = frameOf(&hk)
		if why := packet.Parse(&keys[i], fs.tmpl[i], inPort); why != packet.OK {
			return nil, fmt.Errorf("pair %d template %d (%s): the key extractor rejects it: %v", k, i, hk.String(), why)
		}
	}
	ids := make([]flow.RuleID, n)
	oracle.LookupBatch(keys, ids)
	for i, id := range ids {
		if id != flow.NoMatch {
			ri, ok := id2rule[id]
			if !ok {
				return nil, fmt.Errorf("oracle: rule id %d unknown", id)
			}
			fs.fwd[i] = !rs.drop[ri]
		}
		fs.fwdUpTo[i+1] = fs.fwdUpTo[i]
		if fs.fwd[i] {
			fs.fwdUpTo[i+1]++
		}
	}
	return fs, nil
}

// ruleSetFrames builds every pair's templates at once (a goroutine each).
func ruleSetFrames(rs *ruleSet, pairs, flows int) ([]*frameSet, error) {
	if flows < 1 || bits.OnesCount(uint(flows)) != 1 {
		return nil, fmt.Errorf("--flows %d: a power of two", flows)
	}
	oracle, err := flow.NewTable(flow.Config{Algo: flow.Tuple, MaxEntries: max(len(rs.rules), 1024), Seed: rulesetSeed})
	if err != nil {
		return nil, err
	}
	id2rule := make(map[flow.RuleID]int, len(rs.rules))
	for i := range rs.rules {
		id, _, err := oracle.Add(rs.rules[i], 0)
		if err != nil {
			return nil, fmt.Errorf("oracle: rule %d (%s): %w", i, rs.rules[i].Match.String(), err)
		}
		id2rule[id] = i // a rule with an earlier one's match and priority replaces it, as a FLOW_MOD add does
	}
	out := make([]*frameSet, pairs)
	errs := make([]error, pairs)
	var wg sync.WaitGroup
	for k := range pairs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[k], errs[k] = ruleFrames(rs, oracle, id2rule, k, flows)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// randomKey is a random base header on inPort: locally administered
// unicast MACs, untagged IPv4, TCP, UDP, ICMP or (one in eight) a random
// protocol, random addresses, DSCP 0, random ports and TCP flags.
func randomKey(rng *rand.Rand, inPort uint32) flow.Key {
	var k flow.Key
	mac := func(f flow.Field) {
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], rng.Uint64())
		b[0] = b[0]&^3 | 2
		_ = k.Set(f, b[:6])
	}
	_ = k.SetUint(flow.FieldInPort, uint64(inPort))
	mac(flow.FieldEthDst)
	mac(flow.FieldEthSrc)
	_ = k.SetUint(flow.FieldEthType, flow.EthTypeIPv4)
	proto := []uint8{flow.IPProtoTCP, flow.IPProtoTCP, flow.IPProtoTCP, flow.IPProtoUDP, flow.IPProtoUDP, flow.IPProtoUDP, flow.IPProtoICMP, 0}[rng.IntN(8)]
	if proto == 0 {
		proto = uint8(rng.IntN(256))
	}
	_ = k.SetUint(flow.FieldIPProto, uint64(proto))
	_ = k.SetUint(flow.FieldIPv4Src, uint64(rng.Uint32()))
	_ = k.SetUint(flow.FieldIPv4Dst, uint64(rng.Uint32()))
	_ = k.SetUint(flow.FieldTCPSrc, uint64(rng.IntN(65536)))
	_ = k.SetUint(flow.FieldTCPDst, uint64(rng.IntN(65536)))
	_ = k.SetUint(flow.FieldTCPFlags, uint64(rng.IntN(256)))
	return k
}

// frameOf builds the 60-byte frame of header k and returns it with its
// mark's offset: Ethernet (a VLAN tag when k's vlan_vid has
// OFPVID_PRESENT), IPv4 with k's DSCP, protocol and addresses, and for TCP,
// UDP and SCTP k's port word, for TCP its flags, for ICMP its type and code.
func frameOf(k *flow.Key) ([]byte, int) {
	f := make([]byte, frameLen)
	copy(f[0:6], k.Get(flow.FieldEthDst))
	copy(f[6:12], k.Get(flow.FieldEthSrc))
	off := 12
	if vid := k.GetUint(flow.FieldVlanVID); vid&flow.VIDPresent != 0 {
		binary.BigEndian.PutUint16(f[off:], 0x8100)
		binary.BigEndian.PutUint16(f[off+2:], uint16(k.GetUint(flow.FieldVlanPCP))<<13|uint16(vid&0xfff))
		off += 4
	}
	binary.BigEndian.PutUint16(f[off:], 0x0800)
	ip := f[off+2 : off+22]
	ip[0] = 0x45
	ip[1] = uint8(k.GetUint(flow.FieldIPDSCP)<<2 | k.GetUint(flow.FieldIPECN)&3)
	binary.BigEndian.PutUint16(ip[2:], uint16(frameLen-off-2))
	ip[8] = 64
	proto := uint8(k.GetUint(flow.FieldIPProto))
	ip[9] = proto
	binary.BigEndian.PutUint32(ip[12:], uint32(k.GetUint(flow.FieldIPv4Src)))
	binary.BigEndian.PutUint32(ip[16:], uint32(k.GetUint(flow.FieldIPv4Dst)))
	binary.BigEndian.PutUint16(ip[10:], ipChecksum(ip))
	l4 := off + 22
	sp, dp := uint16(k.GetUint(flow.FieldTCPSrc)), uint16(k.GetUint(flow.FieldTCPDst))
	mark := frameLen - 8
	switch proto {
	case flow.IPProtoTCP:
		binary.BigEndian.PutUint16(f[l4:], sp)
		binary.BigEndian.PutUint16(f[l4+2:], dp)
		fl := uint16(k.GetUint(flow.FieldTCPFlags))
		f[l4+12] = 5<<4 | uint8(fl>>8)&1
		f[l4+13] = uint8(fl)
		mark = l4 + 4
	case flow.IPProtoUDP:
		binary.BigEndian.PutUint16(f[l4:], sp)
		binary.BigEndian.PutUint16(f[l4+2:], dp)
		binary.BigEndian.PutUint16(f[l4+4:], uint16(frameLen-l4))
	case 132: // SCTP
		binary.BigEndian.PutUint16(f[l4:], sp)
		binary.BigEndian.PutUint16(f[l4+2:], dp)
	case flow.IPProtoICMP:
		f[l4], f[l4+1] = uint8(k.GetUint(flow.FieldICMPv4Type)), uint8(k.GetUint(flow.FieldICMPv4Code))
	}
	return f, mark
}

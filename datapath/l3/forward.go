package l3

import (
	"encoding/binary"
	"net/netip"
	"slices"
	"time"

	"github.com/gswitch/gswitch/tables/lpm"
	"github.com/gswitch/gswitch/tables/route"
)

// Out queues a frame for sending on a port (the pipeline's per-batch
// output: it pads the frame and sends the batch's frames per port in one
// call). The router gives the frame up.
type Out = func(port uint32, frame []byte)

// item is a packet waiting for its route lookup.
type item struct {
	frame []byte
	dst   netip.Addr
	hash  uint32
}

// batch holds one Route call's buffers.
type batch struct {
	v4, v6  []item
	addrs4  []uint32
	addrs6  []lpm.Addr6
	leaves  []uint32
	entries []*route.Entry
}

// Route handles a batch of frames received on router port inPort (see the
// package documentation): ARP and neighbour discovery for the port's
// addresses, echo requests to the router, and forwarding, the route
// lookups of the batch done together through the engine. Frames are
// edited in place; the caller gives them up. Frames to send go to out.
func (r *Router) Route(inPort uint32, frames [][]byte, out Out) {
	p := r.ports[inPort]
	if p == nil {
		r.drops[DropNotForUs].Add(uint64(len(frames)))
		return
	}
	b := r.pool.Get().(*batch)
	defer r.pool.Put(b)
	b.v4, b.v6 = b.v4[:0], b.v6[:0]
	now := r.cfg.Now()
	for _, f := range frames {
		if why := r.receive(p, f, b, now, out); why != OK {
			r.drops[why].Add(1)
		}
	}
	if p.tab == nil {
		r.drops[DropNoRoute].Add(uint64(len(b.v4) + len(b.v6)))
		return
	}
	if len(b.v4) > 0 {
		r.lookup4(p.tab, b)
		r.forwardAll(p, b.v4, b.entries, now, out)
	}
	if len(b.v6) > 0 {
		r.lookup6(p.tab, b)
		r.forwardAll(p, b.v6, b.entries, now, out)
	}
	clear(b.v4)
	clear(b.v6)
	clear(b.entries)
}

// receive handles one frame: it answers what is for the router, queues a
// packet to forward in b, or says why it drops the frame.
func (r *Router) receive(p *rport, f []byte, b *batch, now time.Time, out Out) Reason {
	if len(f) < ethLen {
		return DropMalformed
	}
	var dst MAC
	copy(dst[:], f[0:6])
	unicast := dst == p.MAC
	if !unicast && dst != broadcastMAC && !(dst[0] == 0x33 && dst[1] == 0x33) {
		return DropNotForUs
	}
	switch be16(f[12:]) {
	case ethARP:
		if r.cfg.NeighMode == NeighKernel {
			return OK // the kernel owns the addresses and answers
		}
		return r.arp(p, f, now, out)
	case ethIPv4:
		if !unicast {
			return DropNotRoutable
		}
		return r.ipv4(p, f, b, now, out)
	case ethIPv6:
		return r.ipv6(p, f, unicast, b, now, out)
	}
	return DropEtherType
}

// arp answers requests for the port's addresses and learns the sender.
func (r *Router) arp(p *rport, f []byte, now time.Time, out Out) Reason {
	a, ok := parseARP(f[ethLen:])
	if !ok {
		return DropMalformed
	}
	forUs := p.owns(a.tpa)
	if a.sha[0]&1 == 0 && a.sha != (MAC{}) && a.spa.IsGlobalUnicast() && !p.owns(a.spa) {
		k := NeighKey{Port: p.No, Addr: a.spa}
		var q [][]byte
		if a.op == arpReply && forUs {
			q = r.neigh.Confirm(k, a.sha, true, true, now) // RFC 826: the target adds the sender
		} else {
			q = r.neigh.Confirm(k, a.sha, false, forUs, now)
		}
		r.release(p.No, a.sha, q, out)
	}
	if !forUs {
		return DropNotRoutable
	}
	if a.op == arpRequest {
		out(p.No, buildARP(a.sha, p.MAC, arpReply, p.MAC, a.tpa, a.sha, a.spa))
		r.arpReplies.Add(1)
	}
	return OK
}

// release sends the packets that waited for mac.
func (r *Router) release(port uint32, mac MAC, q [][]byte, out Out) {
	for _, pkt := range q {
		copy(pkt[0:6], mac[:])
		out(port, pkt)
		r.forwarded.Add(1)
		r.forwardedBytes.Add(uint64(len(pkt)))
	}
}

// ipv4 checks an IPv4 packet and either answers it (an echo request to the
// router) or queues it for the route lookup.
func (r *Router) ipv4(p *rport, f []byte, b *batch, now time.Time, out Out) Reason {
	ip := f[ethLen:]
	v, why := parseIPv4(ip)
	if why != OK {
		return why
	}
	if v.ihl != ipv4Len {
		return DropIPOptions
	}
	f = f[:ethLen+v.total] // Ethernet padding off
	if _, ours := r.local[v.dst]; ours {
		if r.cfg.NeighMode == NeighKernel {
			return OK // the kernel's to answer
		}
		if echoReply4(f, v) {
			out(p.No, f)
			r.echoes.Add(1)
			return OK
		}
		return DropLocal
	}
	if v.dst.IsMulticast() || v.dst == netip.AddrFrom4([4]byte{255, 255, 255, 255}) || v.dst.IsLoopback() ||
		v.dst.IsUnspecified() || v.src.IsMulticast() || v.src.IsLoopback() || v.src == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
		return DropNotRoutable
	}
	if v.ttl <= 1 {
		if icmpErrorOK4(ip, v) {
			r.icmpError4(p, f, v, icmpTimeExceeded, 0, now, out)
		}
		return DropTTL
	}
	l4 := 0
	if be16(ip[6:])&0x1fff == 0 && be16(ip[6:])&0x2000 == 0 { // not a fragment: the ports are there
		l4 = ipv4Len
	}
	b.v4 = append(b.v4, item{frame: f, dst: v.dst, hash: flowHash(ip, false, l4, v.proto)})
	return OK
}

// icmpErrorOK4 says whether an ICMP error may be sent about a packet (RFC
// 1122 §3.2.2: never about an ICMP error, a later fragment, or a packet to
// or from a non-unicast address).
func icmpErrorOK4(ip []byte, v ipv4View) bool {
	if be16(ip[6:])&0x1fff != 0 || !v.src.IsGlobalUnicast() && !v.src.IsPrivate() {
		return false
	}
	if v.proto == protoICMP {
		if v.total < v.ihl+1 {
			return false
		}
		t := ip[v.ihl]
		return t == icmpEchoRequest || t == icmpEchoReply
	}
	return true
}

func (r *Router) icmpError4(p *rport, f []byte, v ipv4View, typ, code uint8, now time.Time, out Out) {
	src, ok := p.addrFor(v.src)
	if !ok || !r.allowICMP(now) {
		return
	}
	var eth MAC
	copy(eth[:], f[6:12])
	out(p.No, buildICMP4Error(eth, p.MAC, src, f[ethLen:], v, typ, code))
	r.errors.Add(1)
}

// ipv6 handles neighbour discovery, echo requests to the router, and
// queues packets to forward.
func (r *Router) ipv6(p *rport, f []byte, unicast bool, b *batch, now time.Time, out Out) Reason {
	ip := f[ethLen:]
	v, why := parseIPv6(ip)
	if why != OK {
		return why
	}
	f = f[:ethLen+ipv6Len+v.payload]
	ip = f[ethLen:]
	if v.next == protoICMP6 && v.payload >= 1 && (ip[ipv6Len] == ndSolicit || ip[ipv6Len] == ndAdvert) {
		if r.cfg.NeighMode == NeighKernel {
			return OK // the kernel owns the addresses and answers
		}
		return r.nd(p, f, v, now, out)
	}
	if !unicast || v.dst.IsMulticast() {
		return DropNotRoutable
	}
	if _, ours := r.local[v.dst]; ours {
		if r.cfg.NeighMode == NeighKernel {
			return OK // the kernel's to answer
		}
		if echoReply6(f, v) {
			out(p.No, f)
			r.echoes.Add(1)
			return OK
		}
		return DropLocal
	}
	if v.next == protoHopByHop {
		return DropHopByHop
	}
	if v.dst.IsLinkLocalUnicast() || v.dst.IsLoopback() || v.dst.IsUnspecified() ||
		v.src.IsLinkLocalUnicast() || v.src.IsMulticast() || v.src.IsLoopback() {
		return DropNotRoutable
	}
	if v.hops <= 1 {
		if icmpErrorOK6(ip, v) {
			r.icmpError6(p, f, v, icmp6TimeExceeded, 0, now, out)
		}
		return DropTTL
	}
	l4 := 0
	if v.next == protoTCP || v.next == protoUDP {
		l4 = ipv6Len
	}
	b.v6 = append(b.v6, item{frame: f, dst: v.dst, hash: flowHash(ip, true, l4, v.next)})
	return OK
}

// icmpErrorOK6: never about an ICMPv6 error message (RFC 4443 §2.4(e)).
func icmpErrorOK6(ip []byte, v ipv6View) bool {
	if v.src.IsUnspecified() || v.src.IsMulticast() {
		return false
	}
	return v.next != protoICMP6 || ip[ipv6Len] >= 128
}

func (r *Router) icmpError6(p *rport, f []byte, v ipv6View, typ, code uint8, now time.Time, out Out) {
	src, ok := p.addrFor(v.src)
	if !ok || !r.allowICMP(now) {
		return
	}
	var eth MAC
	copy(eth[:], f[6:12])
	out(p.No, buildICMP6Error(eth, p.MAC, src, f[ethLen:], v, typ, code))
	r.errors.Add(1)
}

// nd answers neighbour solicitations for the port's addresses and learns
// from solicitations and advertisements.
func (r *Router) nd(p *rport, f []byte, v ipv6View, now time.Time, out Out) Reason {
	ip := f[ethLen:]
	m, ok := parseND(ip, v)
	if !ok {
		return DropMalformed
	}
	var ethSrc MAC
	copy(ethSrc[:], f[6:12])
	if m.typ == ndAdvert {
		ll := ethSrc
		if m.hasLL {
			ll = m.ll
		}
		if !m.target.IsGlobalUnicast() || p.owns(m.target) {
			return DropNotRoutable
		}
		q := r.neigh.Confirm(NeighKey{Port: p.No, Addr: m.target}, ll, m.flags&naSolicited != 0, false, now)
		r.release(p.No, ll, q, out)
		return OK
	}
	if !p.owns(m.target) {
		return DropNotRoutable
	}
	dst, eth, solicited := v.src, ethSrc, true
	if v.src.IsUnspecified() { // duplicate address detection: answer all nodes
		dst, solicited = netip.AddrFrom16([16]byte{0: 0xff, 1: 0x02, 15: 1}), false
		eth = multicastMAC6(dst)
	} else if m.hasLL {
		eth = m.ll
		if v.src.IsGlobalUnicast() {
			q := r.neigh.Confirm(NeighKey{Port: p.No, Addr: v.src}, m.ll, false, true, now)
			r.release(p.No, m.ll, q, out)
		}
	}
	out(p.No, buildNA(eth, p.MAC, m.target, dst, solicited))
	r.ndAdverts.Add(1)
	return OK
}

// lookup4 looks the batch's IPv4 destinations up through the engine,
// leaving their entries in b.entries.
func (r *Router) lookup4(rt *rtable, b *batch) {
	n := len(b.v4)
	b.addrs4 = slices.Grow(b.addrs4[:0], n)[:n]
	for i := range b.v4 {
		a := b.v4[i].dst.As4()
		b.addrs4[i] = binary.BigEndian.Uint32(a[:])
	}
	b.leaves = slices.Grow(b.leaves[:0], n)[:n]
	err := r.cfg.Engine.LookupLPM4(rt.id4, b.addrs4, b.leaves)
	r.entries(rt, b, b.v4, err)
}

func (r *Router) lookup6(rt *rtable, b *batch) {
	n := len(b.v6)
	b.addrs6 = slices.Grow(b.addrs6[:0], n)[:n]
	for i := range b.v6 {
		a := b.v6[i].dst.As16()
		b.addrs6[i] = lpm.Addr6{Hi: binary.BigEndian.Uint64(a[:8]), Lo: binary.BigEndian.Uint64(a[8:])}
	}
	b.leaves = slices.Grow(b.leaves[:0], n)[:n]
	err := r.cfg.Engine.LookupLPM6(rt.id6, b.addrs6, b.leaves)
	r.entries(rt, b, b.v6, err)
}

// entries turns the leaves into entries. Where the engine failed, or a
// leaf names an entry that does not cover the address (a lookup that raced
// a change long enough for the slot to be reused), the table answers on
// the CPU.
func (r *Router) entries(rt *rtable, b *batch, items []item, err error) {
	n := len(items)
	b.entries = slices.Grow(b.entries[:0], n)[:n]
	if err != nil {
		r.log.Error("l3: engine route lookup failed; the table answered on the CPU", "table", rt.t.ID(), "err", err)
		for i := range items {
			b.entries[i], _ = rt.t.Lookup(items[i].dst)
		}
		return
	}
	rt.t.Entries(b.leaves, b.entries)
	for i, e := range b.entries {
		if e != nil && !e.Covers(items[i].dst) {
			b.entries[i], _ = rt.t.Lookup(items[i].dst)
		}
	}
}

// forwardAll forwards looked-up packets: next hop by flow hash, counters,
// TTL, MACs, neighbour resolution.
func (r *Router) forwardAll(in *rport, items []item, ents []*route.Entry, now time.Time, out Out) {
	var memo neighMemo
	for i := range items {
		if why := r.forward(in, &items[i], ents[i], now, out, &memo); why != OK {
			r.drops[why].Add(1)
		}
	}
}

// neighMemo remembers the batch's last neighbour that could be sent to:
// within one batch (one clock reading) its answer does not change, so
// consecutive packets to one next hop skip the table's lock.
type neighMemo struct {
	key NeighKey
	mac MAC
	ok  bool
}

func (r *Router) forward(in *rport, it *item, e *route.Entry, now time.Time, out Out, memo *neighMemo) Reason {
	f := it.frame
	if e == nil {
		r.unreachable(in, f, now, out)
		return DropNoRoute
	}
	nh, idx := e.Pick(it.hash)
	op := r.ports[nh.Port]
	if op == nil {
		return DropNextHopPort
	}
	target := nh.Gateway
	if !target.IsValid() {
		target = it.dst
	}
	if r.local[target] != 0 {
		return DropNotRoutable // a route through the router's own address
	}
	e.Count(idx, 1, uint64(len(f)))
	ip := f[ethLen:]
	if it.dst.Is4() {
		ttl := ip[8]
		ip[8] = ttl - 1
		binary.BigEndian.PutUint16(ip[10:], csumAdjust(be16(ip[10:]), uint16(ttl)<<8|uint16(ip[9]), uint16(ttl-1)<<8|uint16(ip[9])))
	} else {
		ip[7]--
	}
	copy(f[6:12], op.MAC[:])
	k := NeighKey{Port: op.No, Addr: target}
	if memo.ok && memo.key == k {
		copy(f[0:6], memo.mac[:])
		out(op.No, f)
		r.forwarded.Add(1)
		r.forwardedBytes.Add(uint64(len(f)))
		return OK
	}
	res := r.neigh.Resolve(k, f, now, r.cfg.NeighMode == NeighKernel)
	if res.Verdict == Send && !res.Solicit {
		*memo = neighMemo{key: k, mac: res.MAC, ok: true}
	}
	if res.Verdict == Dropped {
		if r.cfg.NeighMode == NeighKernel && res.Reason == DropNeighbour {
			r.askKernel(NeighKey{Port: op.No, Addr: target}, now)
		}
		return res.Reason
	}
	switch res.Verdict {
	case Send:
		copy(f[0:6], res.MAC[:])
		out(op.No, f)
		r.forwarded.Add(1)
		r.forwardedBytes.Add(uint64(len(f)))
	case Queued:
		r.queued.Add(1)
	}
	if res.Reason == DropQueueFull {
		r.drops[DropQueueFull].Add(1)
	}
	if res.Solicit {
		if s := r.solicitation(NeighKey{Port: op.No, Addr: target}, res.Unicast); s != nil {
			out(op.No, s)
		}
	}
	return OK
}

// unreachable sends an ICMP destination unreachable (no route) about the
// packet in f back to its sender.
func (r *Router) unreachable(in *rport, f []byte, now time.Time, out Out) {
	ip := f[ethLen:]
	if ip[0]>>4 == 4 {
		v, _ := parseIPv4(ip)
		if icmpErrorOK4(ip, v) {
			r.icmpError4(in, f, v, icmpUnreachable, 0, now, out)
		}
		return
	}
	v, _ := parseIPv6(ip)
	if icmpErrorOK6(ip, v) {
		r.icmpError6(in, f, v, icmp6Unreachable, 0, now, out)
	}
}

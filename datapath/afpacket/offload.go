package afpacket

import (
	"encoding/binary"
	"errors"
)

// Checksum and segmentation offload.
//
// A frame the local stack sends through a veth (or any device announcing
// tx checksum and TSO offload) leaves the sender with its TCP/UDP checksum
// only partly computed (CHECKSUM_PARTIAL: the checksum field holds the
// pseudo-header sum) and, for TCP, possibly as one GSO frame of up to 64 KiB
// that the device was to cut into MTU-sized segments. AF_PACKET hands such
// frames over as they are, flagged TP_STATUS_CSUMNOTREADY. Forwarded as is,
// the receiving host drops them (bad checksum) or the send fails (longer
// than the MTU). The socket therefore sets PACKET_VNET_HDR: the kernel puts
// a struct virtio_net_hdr before each frame in the ring, which says where
// the checksum starts and lies and, for a GSO frame, its type and segment
// size. Frame.Offload carries it; AppendFinished completes the frame:
// the checksum finished, a GSO frame cut into segments (TCP over IPv4 or
// IPv6, and UDP_L4) as the device would have done.

// virtio_net_hdr (include/uapi/linux/virtio_net.h): flags, gso_type,
// hdr_len, gso_size, csum_start, csum_offset; little-endian (the kernel
// writes it with vio_le(), native on the little-endian machines we run on).
const (
	vnetHdrLen = 10

	vnetFlagNeedsCsum = 1

	// GSO types of virtio_net_hdr.gso_type.
	GSONone  = 0
	GSOTCPv4 = 1
	GSOUDP   = 3 // UFO: not produced by current kernels
	GSOTCPv6 = 4
	GSOUDPL4 = 5
	gsoECN   = 0x80
)

// Offload is what the sender's stack left for the device to do on a
// frame: finish its L4 checksum, cut it into segments. The zero value
// means nothing is left.
type Offload struct {
	// NeedsCsum: the L4 checksum is partial; it covers the frame from
	// CsumStart (an offset into the frame) to its end, and lies at
	// CsumStart+CsumOffset.
	NeedsCsum             bool
	CsumStart, CsumOffset int
	// GSOType is GSONone or the kind of segmentation left to do, GSOSize
	// the payload of each segment.
	GSOType uint8
	GSOSize int
}

// Pending reports whether the frame must be finished before it is sent.
func (o Offload) Pending() bool { return o.NeedsCsum || o.GSOType&^gsoECN != GSONone }

// Shift moves the offsets by n bytes: a VLAN tag put back in front of the
// network header shifts it by 4.
func (o *Offload) Shift(n int) {
	if o.NeedsCsum {
		o.CsumStart += n
	}
}

// parseVnetHdr reads a virtio_net_hdr.
func parseVnetHdr(b []byte) Offload {
	var o Offload
	if b[0]&vnetFlagNeedsCsum != 0 {
		o.NeedsCsum = true
		o.CsumStart = int(binary.LittleEndian.Uint16(b[6:]))
		o.CsumOffset = int(binary.LittleEndian.Uint16(b[8:]))
	}
	if o.GSOType = b[1]; o.GSOType&^gsoECN != GSONone {
		o.GSOSize = int(binary.LittleEndian.Uint16(b[4:]))
	}
	return o
}

// ErrOffload is returned for a frame whose offload state cannot be
// finished: offsets outside the frame, a GSO type or header this package
// does not segment.
var ErrOffload = errors.New("afpacket: cannot finish the frame's checksum or segmentation offload")

// FinishChecksum completes a partial L4 checksum in place: the ones'
// complement sum of the frame from CsumStart to its end (the field holds
// the pseudo-header sum), complemented, is stored at CsumStart+CsumOffset.
func FinishChecksum(frame []byte, o Offload) error {
	if !o.NeedsCsum {
		return nil
	}
	at := o.CsumStart + o.CsumOffset
	if o.CsumStart < 0 || o.CsumOffset < 0 || at+2 > len(frame) {
		return ErrOffload
	}
	c := ^fold(sum(0, frame[o.CsumStart:]))
	if c == 0 && o.CsumOffset == 6 { // UDP: 0 means no checksum
		c = 0xffff
	}
	binary.BigEndian.PutUint16(frame[at:], c)
	return nil
}

// AppendFinished appends the finished form of frame to dst — the frame
// with its checksum completed, or the segments of a GSO frame — and the
// slices of dst holding each to out. The input frame is not changed.
func AppendFinished(dst []byte, out [][]byte, frame []byte, o Offload) ([]byte, [][]byte, error) {
	if o.GSOType&^gsoECN == GSONone {
		start := len(dst)
		dst = append(dst, frame...)
		f := dst[start:len(dst):len(dst)]
		if err := FinishChecksum(f, o); err != nil {
			return dst[:start], out, err
		}
		return dst, append(out, f), nil
	}
	return appendSegments(dst, out, frame, o)
}

// appendSegments cuts a GSO frame as tcp_gso_segment and
// __udp_gso_segment do: headers copied, IPv4 length, id and header
// checksum, IPv6 payload length, TCP sequence number and flags (FIN and
// PSH on the last segment only, CWR on the first only) or UDP length set
// per segment, and each segment's L4 checksum computed in full.
func appendSegments(dst []byte, out [][]byte, frame []byte, o Offload) ([]byte, [][]byte, error) {
	l3, v4, ok := networkHeader(frame)
	l4 := o.CsumStart
	if !ok || !o.NeedsCsum || o.GSOSize <= 0 || l4 < l3+20 || l4 > len(frame) {
		return dst, out, ErrOffload
	}
	var hlen int
	switch o.GSOType &^ gsoECN {
	case GSOTCPv4, GSOTCPv6:
		if l4+20 > len(frame) || o.CsumOffset != 16 {
			return dst, out, ErrOffload
		}
		hlen = l4 + int(frame[l4+12]>>4)*4
		if hlen < l4+20 {
			return dst, out, ErrOffload
		}
	case GSOUDPL4:
		if o.CsumOffset != 6 {
			return dst, out, ErrOffload
		}
		hlen = l4 + 8
	default:
		return dst, out, ErrOffload
	}
	if hlen > len(frame) {
		return dst, out, ErrOffload
	}
	tcp := o.GSOType&^gsoECN != GSOUDPL4
	payload := frame[hlen:]
	n := (len(payload) + o.GSOSize - 1) / o.GSOSize
	if n == 0 {
		n = 1
	}
	// Grow once, so the segments' slices all point into the final array.
	if need := len(dst) + n*hlen + len(payload); cap(dst) < need {
		nd := make([]byte, len(dst), need+need/4)
		copy(nd, dst)
		dst = nd
	}
	var seq uint32
	if tcp {
		seq = binary.BigEndian.Uint32(frame[l4+4:])
	}
	var id uint16
	if v4 {
		id = binary.BigEndian.Uint16(frame[l3+4:])
	}
	for i := range n {
		chunk := payload[min(i*o.GSOSize, len(payload)):min((i+1)*o.GSOSize, len(payload))]
		start := len(dst)
		dst = append(dst, frame[:hlen]...)
		dst = append(dst, chunk...)
		s := dst[start:len(dst):len(dst)]
		l4len := len(s) - l4
		if v4 {
			binary.BigEndian.PutUint16(s[l3+2:], uint16(len(s)-l3))
			binary.BigEndian.PutUint16(s[l3+4:], id+uint16(i))
			ihl := int(s[l3]&0xf) * 4
			s[l3+10], s[l3+11] = 0, 0
			binary.BigEndian.PutUint16(s[l3+10:], ^fold(sum(0, s[l3:l3+ihl])))
		} else {
			binary.BigEndian.PutUint16(s[l3+4:], uint16(len(s)-l3-40))
		}
		var proto byte = 17
		if tcp {
			proto = 6
			binary.BigEndian.PutUint32(s[l4+4:], seq+uint32(i*o.GSOSize))
			const fin, psh, cwr = 0x01, 0x08, 0x80
			if i != n-1 {
				s[l4+13] &^= fin | psh
			}
			if i != 0 {
				s[l4+13] &^= cwr
			}
		} else {
			binary.BigEndian.PutUint16(s[l4+4:], uint16(l4len))
		}
		at := l4 + o.CsumOffset
		s[at], s[at+1] = 0, 0
		var ps uint32
		if v4 {
			ps = sum(0, s[l3+12:l3+20])
		} else {
			ps = sum(0, s[l3+8:l3+40])
		}
		ps += uint32(proto) + uint32(l4len)
		c := ^fold(sum(ps, s[l4:]))
		if c == 0 && !tcp {
			c = 0xffff
		}
		binary.BigEndian.PutUint16(s[at:], c)
		out = append(out, s)
	}
	return dst, out, nil
}

// networkHeader returns the offset of the IP header after the Ethernet
// header and any VLAN tags, and whether it is IPv4 (else IPv6).
func networkHeader(frame []byte) (int, bool, bool) {
	off := 12
	for off+2 <= len(frame) {
		switch binary.BigEndian.Uint16(frame[off:]) {
		case 0x8100, 0x88a8:
			off += 4
			continue
		case 0x0800:
			l3 := off + 2
			ok := l3+20 <= len(frame) && frame[l3]>>4 == 4 && int(frame[l3]&0xf)*4 >= 20
			return l3, true, ok
		case 0x86dd:
			l3 := off + 2
			return l3, false, l3+40 <= len(frame) && frame[l3]>>4 == 6
		}
		return 0, false, false
	}
	return 0, false, false
}

// sum adds b to s as big-endian 16-bit words (ones' complement, carries
// kept in the upper half).
func sum(s uint32, b []byte) uint32 {
	acc := uint64(s)
	for len(b) >= 8 {
		acc += uint64(binary.BigEndian.Uint32(b)) + uint64(binary.BigEndian.Uint32(b[4:]))
		b = b[8:]
	}
	for len(b) >= 2 {
		acc += uint64(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		acc += uint64(b[0]) << 8
	}
	for acc>>32 != 0 {
		acc = acc&0xffffffff + acc>>32
	}
	return uint32(acc)
}

// fold folds a 32-bit sum to 16 bits.
func fold(s uint32) uint16 {
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

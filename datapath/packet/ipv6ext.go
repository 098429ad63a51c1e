package packet

// The ipv6_exthdr bits, OFPIEH_* of OpenFlow 1.3 §7.2.3.7.
const (
	IEHNoNext = 1 << 0 // OFPIEH_NONEXT: "no next header" encountered
	IEHESP    = 1 << 1 // OFPIEH_ESP: encrypted security payload present
	IEHAuth   = 1 << 2 // OFPIEH_AUTH: authentication header present
	IEHDest   = 1 << 3 // OFPIEH_DEST: one or two destination options headers present
	IEHFrag   = 1 << 4 // OFPIEH_FRAG: fragment header present
	IEHRouter = 1 << 5 // OFPIEH_ROUTER: routing header present
	IEHHop    = 1 << 6 // OFPIEH_HOP: hop-by-hop options header present
	IEHUnrep  = 1 << 7 // OFPIEH_UNREP: unexpected repeats encountered
	IEHUnseq  = 1 << 8 // OFPIEH_UNSEQ: unexpected sequencing encountered
)

// The order RFC 8200 §4.1 recommends for extension headers; a destination
// options header ranks before the routing header while no routing,
// fragment, authentication or ESP header has been seen, after them
// otherwise.
const (
	rankHop = iota
	rankDestFirst
	rankRouter
	rankFrag
	rankAuth
	rankESP
	rankDestLast
)

// extWalk walks an IPv6 extension header chain and collects the OFPIEH_*
// flags. The rules for the two diagnostic flags:
//
//   - IEHUnrep: a second header of any kind but destination options, or a
//     third destination options header.
//   - IEHUnseq: a hop-by-hop header that is not the first, or a header whose
//     rank (above) is lower than the one before it.
type extWalk struct {
	flags uint32
	last  int8  // rank of the previous header, -1 before the first
	n     uint8 // headers seen, saturating
	dests uint8 // destination options headers seen, saturating
}

// see records one extension header of kind 'flag' and rank 'rank'.
func (x *extWalk) see(flag uint32, rank int8) {
	if flag == IEHDest {
		if x.dests++; x.dests > 2 {
			x.flags |= IEHUnrep
			x.dests = 2
		}
	} else if x.flags&flag != 0 {
		x.flags |= IEHUnrep
	}
	if (flag == IEHHop && x.n > 0) || (x.n > 0 && rank < x.last) {
		x.flags |= IEHUnseq
	}
	x.flags |= flag
	x.last = rank
	if x.n < 255 {
		x.n++
	}
}

// destRank is the rank of a destination options header seen now.
func (x *extWalk) destRank() int8 {
	if x.flags&(IEHRouter|IEHFrag|IEHAuth|IEHESP) == 0 {
		return rankDestFirst
	}
	return rankDestLast
}

// walk follows the chain that starts with next header 'nh' over 'b' (the
// IPv6 payload). It returns ip_proto (the first header that is not an
// extension header; ESP, "no next header", or the next header of a
// non-first fragment, where the chain cannot be followed) and the
// transport header's bytes, nil where there is none to read.
func (x *extWalk) walk(nh uint8, b []byte) (uint8, []byte, Reason) {
	for {
		var n int
		switch nh {
		case ipProtoHopOpts, ipProtoRouting, ipProtoDstOpts:
			if len(b) < 2 {
				return nh, nil, TruncatedIPv6Ext
			}
			n = (int(b[1]) + 1) * 8
			switch nh {
			case ipProtoHopOpts:
				x.see(IEHHop, rankHop)
			case ipProtoRouting:
				x.see(IEHRouter, rankRouter)
			default:
				x.see(IEHDest, x.destRank())
			}
		case ipProtoAH:
			if len(b) < 2 {
				return nh, nil, TruncatedIPv6Ext
			}
			n = (int(b[1]) + 2) * 4
			x.see(IEHAuth, rankAuth)
		case ipProtoFragment:
			n = 8
			x.see(IEHFrag, rankFrag)
			if len(b) >= n && be16(b[2:])>>3 != 0 {
				return b[0], nil, OK // a later fragment: no transport header
			}
		case ipProtoESP:
			x.see(IEHESP, rankESP)
			return nh, nil, OK
		case ipProtoNoNext:
			x.flags |= IEHNoNext
			return nh, nil, OK
		default:
			return nh, b, OK
		}
		if len(b) < n {
			return nh, nil, TruncatedIPv6Ext
		}
		nh, b = b[0], b[n:]
	}
}

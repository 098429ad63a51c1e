package pipeline

import (
	"encoding/binary"

	"github.com/gswitch/gswitch/tables/flow"
)

// This file holds the PBB (802.1ah) actions: push_pbb encapsulates the
// frame behind a backbone Ethernet header and an I-TAG, pop_pbb takes
// them off, and set-field writes pbb_isid. An I-TAG is pcp(3) dei(1)
// uca(1) res(3) and the 24-bit I-SID; the customer frame follows it.

const itagLen = 4

// pushPBB returns the frame encapsulated: the backbone addresses are the
// frame's own, eth_type is ethType, and the I-TAG copies the frame's I-TAG
// when it already is a PBB frame, or is 0 (OpenFlow 1.3 §5.12, Table 6).
func pushPBB(frame []byte, ethType uint16) ([]byte, bool) {
	l, ok := parseLayout(frame)
	if !ok {
		return frame, false
	}
	var itag uint32
	if l.ethType == flow.EthTypePBB && l.l3+itagLen <= len(frame) {
		itag = binary.BigEndian.Uint32(frame[l.l3:])
	}
	out := make([]byte, 0, ethHdr+itagLen+len(frame))
	out = append(out, frame[:12]...)
	out = binary.BigEndian.AppendUint16(out, ethType)
	out = binary.BigEndian.AppendUint32(out, itag)
	return append(out, frame...), true
}

// popPBB returns the customer frame of a PBB frame (a sub-slice: the
// backbone header, its tags and the I-TAG are dropped).
func popPBB(frame []byte) ([]byte, bool) {
	l, ok := parseLayout(frame)
	if !ok || l.ethType != flow.EthTypePBB || l.l3+itagLen+ethHdr > len(frame) {
		return frame, false
	}
	return frame[l.l3+itagLen:], true
}

// setISID writes pbb_isid (v: 3 bytes) into the I-TAG.
func setISID(frame []byte, l *layout, v []byte) bool {
	if l.ethType != flow.EthTypePBB || l.l3+itagLen > len(frame) || len(v) != 3 {
		return false
	}
	copy(frame[l.l3+1:], v)
	return true
}

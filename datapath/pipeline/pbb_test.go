package pipeline

import (
	"encoding/binary"
	"testing"

	"github.com/gswitch/gswitch/tables/flow"
)

// pbbFrame wraps a customer frame behind a backbone header (the customer
// addresses) and an I-TAG with I-SID isid: eth(0x88e7)/itag/customer.
func pbbFrame(customer []byte, isid uint32) []byte {
	out := append([]byte(nil), customer[:12]...)
	out = binary.BigEndian.AppendUint16(out, flow.EthTypePBB)
	out = binary.BigEndian.AppendUint32(out, isid&0xffffff)
	return append(out, customer...)
}

func TestPushPopPBB(t *testing.T) {
	c := mplsIPv4(t, 64)
	got, ok := pushPBB(c, flow.EthTypePBB)
	if !ok {
		t.Fatal("push_pbb refused")
	}
	eq(t, "push_pbb", got, pbbFrame(c, 0))
	got, _ = pushPBB(pbbFrame(c, 100), flow.EthTypePBB)
	eq(t, "push_pbb on pbb copies the I-TAG", got, pbbFrame(pbbFrame(c, 100), 100))
	got, ok = popPBB(pbbFrame(c, 100))
	if !ok {
		t.Fatal("pop_pbb refused")
	}
	eq(t, "pop_pbb", got, c)
	if _, ok := popPBB(c); ok {
		t.Error("pop_pbb on a frame without PBB")
	}
	if _, ok := popPBB(pbbFrame(c, 1)[:25]); ok {
		t.Error("pop_pbb on a truncated frame")
	}
	f := pbbFrame(c, 100)
	if !setField(f, flow.FieldPBBISID, []byte{0, 0, 203}) {
		t.Fatal("set_field pbb_isid refused")
	}
	eq(t, "set_field pbb_isid", f, pbbFrame(c, 203))
}

package openflow

import (
	"bytes"
	"testing"

	"github.com/netrack/openflow/ofp"

	"github.com/gswitch/gswitch/tables/flow"
)

// mpls_label and ipv6_flabel are 20-bit fields carried in 4 bytes
// (OpenFlow 1.3 §7.2.3.7; os-ken and Open vSwitch send them so).
func TestFourByteOXMs(t *testing.T) {
	// eth_type=0x8847, mpls_label=100 / eth_type=0x86dd, ipv6_flabel=0x100 masked 0xfff00
	cases := []struct {
		name  string
		match string
		f     flow.Field
		v     uint64
	}{
		{"mpls_label", "0001 0012 80000a02 8847 80004404 00000064 000000000000", flow.FieldMPLSLabel, 100},
		{"ipv6_flabel", "0001 0016 80000a02 86dd 80003908 00000100 000fff00 0000", flow.FieldIPv6FLabel, 0x100},
	}
	for _, c := range cases {
		b := unhex(t, c.match)
		m, n, err := DecodeMatch(b)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if n != len(b) {
			t.Errorf("%s: length %d, want %d", c.name, n, len(b))
		}
		v, _ := m.Match.Get(c.f)
		var want flow.Key
		_ = want.SetUint(c.f, c.v)
		if !bytes.Equal(v, want.Get(c.f)) {
			t.Errorf("%s: value %x", c.name, v)
		}
		if got := EncodeMatch(&m.Match); !bytes.Equal(got, b) {
			t.Errorf("%s: encoded %x, want %x", c.name, got, b)
		}
	}
	// A value beyond 20 bits in the spare byte is refused.
	if _, _, err := DecodeMatch(unhex(t, "0001 0012 80000a02 8847 80004404 01000064 000000000000")); err == nil || err.Code != ofp.ErrCodeBadMatchBadValue {
		t.Errorf("mpls_label 0x01000064: %v", err)
	}
	// A 3-byte mpls_label is the wrong length.
	if _, _, err := DecodeMatch(unhex(t, "0001 0011 80000a02 8847 80004403 000064 00000000000000")); err == nil || err.Code != ofp.ErrCodeBadMatchBadLen {
		t.Errorf("3-byte mpls_label: %v", err)
	}
}

func TestSetFieldMPLSLabel(t *testing.T) {
	b := unhex(t, "0019 0010 80004404 000000cb 00000000")
	as, err := DecodeActions(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(as) != 1 || as[0].Field != flow.FieldMPLSLabel || !bytes.Equal(as[0].Value, []byte{0, 0, 0xcb}) {
		t.Fatalf("decoded %+v", as)
	}
	if got := EncodeActions(as); !bytes.Equal(got, b) {
		t.Errorf("encoded %x, want %x", got, b)
	}
}

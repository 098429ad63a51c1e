package lpm

import (
	"encoding/binary"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/gswitch/gswitch/tables/bubble"
)

// FuzzReadPrefixes: any input either fails or yields prefixes that print and
// read back to the same list.
func FuzzReadPrefixes(f *testing.F) {
	for _, s := range []string{
		"10.0.0.0/8\n2001:db8::/32\n", "# c\n\n0.0.0.0/0\n", "10.0.0.1/8\n", "1.2.3.4/32 x\n",
		"::ffff:1.2.3.0/120\n", "fe80::/10%eth0\n", "\x00\xff/\n", "  ::/0  \r\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ps, err := ReadPrefixes(strings.NewReader(s), "fuzz")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz:") {
				t.Fatalf("error without position: %v", err)
			}
			return
		}
		var b strings.Builder
		for _, p := range ps {
			if !p.IsValid() || p.Masked() != p {
				t.Fatalf("accepted %v", p)
			}
			b.WriteString(p.String() + "\n")
		}
		again, err := ReadPrefixes(strings.NewReader(b.String()), "again")
		if err != nil || len(again) != len(ps) {
			t.Fatalf("re-read: %v, %d of %d", err, len(again), len(ps))
		}
		for i := range ps {
			if again[i] != ps[i] {
				t.Fatalf("re-read %v as %v", ps[i], again[i])
			}
		}
	})
}

// FuzzTableOps decodes the input into operations on small tables of both
// families (op byte, then address bytes, length, next hop) and checks every
// step against the reference.
func FuzzTableOps(f *testing.F) {
	f.Add([]byte{0, 10, 0, 0, 0, 8, 1, 0, 10, 1, 0, 0, 16, 2, 2, 10, 1, 2, 3, 1, 0, 10, 0, 0, 0, 8})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 5, 0, 255, 255, 255, 255, 32, 6, 1, 0, 0, 0, 0, 0})
	f.Add([]byte{0x40, 0x20, 0x01, 0x0d, 0xb8, 48, 1, 0x40, 0x20, 0x01, 0x0d, 0xb8, 128, 2, 0x41, 0x20, 0x01, 0x0d, 0xb8, 48})
	f.Fuzz(func(t *testing.T, data []byte) {
		tables := map[Family]*Table{}
		refs := map[Family]*Reference{}
		for _, fam := range []Family{IPv4, IPv6} {
			tb, err := New(fam, Options{MinFree: 1, HeadRoom: -1, GarbageThreshold: 0.1})
			if err != nil {
				t.Fatal(err)
			}
			tables[fam], refs[fam] = tb, NewReference(fam)
		}
		for len(data) > 0 && len(data) < 4096 {
			op := data[0]
			fam := IPv4
			if op&0x40 != 0 {
				fam = IPv6
			}
			var a netip.Addr
			a, data = fuzzAddr(fam, data[1:])
			l, nh := 0, uint32(0)
			if len(data) > 0 {
				l, data = int(data[0]), data[1:]
			}
			if len(data) > 0 {
				nh, data = uint32(data[0]), data[1:]
			}
			fuzzStep(t, tables[fam], refs[fam], op&3, a, l, nh)
		}
	})
}

// fuzzAddr takes the leading bytes of an address (few, to make prefixes
// collide) and zero-fills the rest.
func fuzzAddr(fam Family, data []byte) (netip.Addr, []byte) {
	var b [16]byte
	n := min(len(data), 4)
	copy(b[:], data[:n])
	if fam == IPv4 {
		return netip.AddrFrom4([4]byte(b[:4])), data[n:]
	}
	return netip.AddrFrom16(b), data[n:]
}

func fuzzStep(t *testing.T, tb *Table, ref *Reference, op byte, a netip.Addr, l int, nh uint32) {
	p := netip.PrefixFrom(a, l%(tb.Family().Width()+2)) // sometimes invalid
	switch op {
	case 0, 3:
		err, rerr := tb.Insert(p, nh), ref.Insert(p, nh)
		if (err == nil) != (rerr == nil) {
			t.Fatalf("insert %v %d: table %v, reference %v", p, nh, err, rerr)
		}
	case 1:
		err, rerr := tb.Delete(p), ref.Delete(p)
		if (err == nil) != (rerr == nil) {
			t.Fatalf("delete %v: table %v, reference %v", p, err, rerr)
		}
	}
	for _, x := range []netip.Addr{a, a.Next(), a.Prev()} {
		got, _ := tb.Lookup(x)
		if want, _ := ref.Lookup(x); got != want {
			t.Fatalf("lookup %v: %d, want %d", x, got, want)
		}
	}
}

// FuzzNewView: arbitrary meta words and region sizes give an error or a View
// whose lookups stay inside the image.
func FuzzNewView(f *testing.F) {
	for _, c := range []struct {
		fam     Family
		p       string
		strides []int
	}{{IPv4, "10.1.2.0/24", []int{8, 8, 8, 8}}, {IPv6, "2001:db8::/33", slices.Repeat([]int{8}, 16)}} {
		tb, err := Build(c.fam, []Route{{netip.MustParsePrefix(c.p), 3}}, Options{Strides: c.strides, MinFree: 1})
		if err != nil {
			f.Fatal(err)
		}
		seed := imageBytes(tb.Mirror().Image())
		if _, err := NewView(imageFrom(seed)); err != nil {
			f.Fatalf("seed image does not decode to a valid image: %v", err)
		}
		f.Add(seed)
	}
	f.Add([]byte{0x47, 0x41, 0x4d, 0x54})
	f.Fuzz(func(t *testing.T, data []byte) {
		im := imageFrom(data)
		v, err := NewView(im)
		if err != nil {
			return
		}
		for i := 0; i < 64; i++ {
			v.Lookup4(uint32(i) * 0x9e3779b9)
			v.Lookup6(uint64(i)*0x9e3779b97f4a7c15, uint64(i))
		}
		v.LookupBatch4([]uint32{0, 1, ^uint32(0)}, make([]uint32, 3))
		v.LookupBatch6([]Addr6{{0, 0}, {^uint64(0), ^uint64(0)}}, make([]uint32, 2))
	})
}

// imageBytes encodes an image small enough for the fuzzer: region count,
// then per region its word count (uint16) and words (uint32, little-endian),
// non-zero words only as (offset, value) pairs after a count.
func imageBytes(im *bubble.Image) []byte {
	var out []byte
	out = append(out, byte(len(im.Words)))
	for _, w := range im.Words {
		out = binary.LittleEndian.AppendUint16(out, uint16(min(len(w), 0xffff)))
		var nz []int
		for i, x := range w {
			if x != 0 && i < 0xffff {
				nz = append(nz, i)
			}
		}
		out = binary.LittleEndian.AppendUint16(out, uint16(len(nz)))
		for _, i := range nz {
			out = binary.LittleEndian.AppendUint16(out, uint16(i))
			out = binary.LittleEndian.AppendUint32(out, w[i])
		}
	}
	return out
}

// imageFrom decodes imageBytes' format, tolerating any input.
func imageFrom(data []byte) *bubble.Image {
	im := &bubble.Image{}
	if len(data) == 0 {
		return im
	}
	regions := int(data[0] % 20)
	data = data[1:]
	take := func(n int) []byte {
		if len(data) < n {
			data = nil
			return make([]byte, n)
		}
		b := data[:n]
		data = data[n:]
		return b
	}
	for r := 0; r < regions; r++ {
		w := make([]uint32, binary.LittleEndian.Uint16(take(2)))
		nz := int(binary.LittleEndian.Uint16(take(2)))
		for i := 0; i < nz && len(data) > 0; i++ {
			off := int(binary.LittleEndian.Uint16(take(2)))
			v := binary.LittleEndian.Uint32(take(4))
			if off < len(w) {
				w[off] = v
			}
		}
		im.Words = append(im.Words, w)
	}
	return im
}

// TestNewViewRejectsCorruptImages mutates a good image in the ways that
// matter.
func TestNewViewRejectsCorruptImages(t *testing.T) {
	tb, err := Build(IPv4, []Route{{netip.MustParsePrefix("10.1.2.0/24"), 3}, {netip.MustParsePrefix("10.1.2.128/25"), 4}}, Options{Strides: []int{8, 8, 8, 8}, MinFree: 1})
	mustOK(t, err)
	good := tb.Mirror().Image()
	if _, err := NewView(good); err != nil {
		t.Fatal(err)
	}
	pointer := func(im *bubble.Image) *uint32 { return &im.Words[1][10] } // 10.x: a pointer
	cases := map[string]func(im *bubble.Image){
		"magic":          func(im *bubble.Image) { im.Words[0][0]++ },
		"family":         func(im *bubble.Image) { im.Words[0][metaFamily] = 5 },
		"family 260":     func(im *bubble.Image) { im.Words[0][metaFamily] = 260 },
		"levels":         func(im *bubble.Image) { im.Words[0][metaLevels] = 3 },
		"stride 0":       func(im *bubble.Image) { im.Words[0][metaStrides] = 0 },
		"stride sum":     func(im *bubble.Image) { im.Words[0][metaStrides+1] = 9 },
		"stride 25":      func(im *bubble.Image) { im.Words[0][metaStrides+3] = 25 },
		"no meta":        func(im *bubble.Image) { im.Words = im.Words[:1] },
		"short meta":     func(im *bubble.Image) { im.Words[0] = im.Words[0][:2] },
		"root size":      func(im *bubble.Image) { im.Words[1] = im.Words[1][:255] },
		"partial node":   func(im *bubble.Image) { im.Words[2] = im.Words[2][:300] },
		"jump self":      func(im *bubble.Image) { im.Words[2][0] = 1 },
		"jump backwards": func(im *bubble.Image) { im.Words[3][0] = 1 },
		"jump past end":  func(im *bubble.Image) { *pointer(im) = 9 },
		"node past end":  func(im *bubble.Image) { *pointer(im) = 2 | 1000<<8 },
	}
	for name, corrupt := range cases {
		im := good.Clone()
		if *pointer(im)&0xff == 0 {
			t.Fatalf("test setup: 10/8's root entry is not a pointer")
		}
		corrupt(im)
		if _, err := NewView(im); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := NewView(nil); err == nil {
		t.Errorf("nil image accepted")
	}
}

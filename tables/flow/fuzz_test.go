package flow

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gswitch/gswitch/tables/bubble"
)

// byteSource is a rand.Source that reads the fuzzer's bytes, then a fixed
// pseudo-random sequence (never a constant: rand.IntN would loop forever).
type byteSource struct {
	b []byte
	n uint64
}

func (s *byteSource) Uint64() uint64 {
	if len(s.b) == 0 {
		s.n += 0x9e3779b97f4a7c15
		z := s.n
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		return z ^ z>>31
	}
	var buf [8]byte
	n := copy(buf[:], s.b)
	s.b = s.b[n:]
	return binary.LittleEndian.Uint64(buf[:])
}

func (s *byteSource) empty() bool { return len(s.b) == 0 }

func FuzzReadClassBench(f *testing.F) {
	f.Add("@27.195.96.7/32\t107.130.16.1/32\t0 : 65535\t4646 : 4646\t0x06/0xFF\t0x0000/0x0200\t\n")
	f.Add("@0.0.0.0/0\t10.0.0.0/8\t1024 : 65535\t80 : 443\t0x11/0xFF\n\n@1.2.3.4/32\t0.0.0.0/0\t0 : 65535\t0 : 65535\t0x00/0x00\n")
	f.Add("@1.2.3.0/24\t5.6.0.0/16\t0 : 65535\t81 : 80\t0x06/0xFF\n")
	f.Add("@1.2.3.1/24\t5.6.0.0/16\t0:65535\t80:80\t0x06/0xff\t0x1000/0x1000")
	f.Add("garbage\n@@\t\t\t\t\t")
	f.Fuzz(func(t *testing.T, data string) {
		rules, err := ReadClassBench(strings.NewReader(data), "fuzz")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz:") {
				t.Fatalf("error without position: %v", err)
			}
			return
		}
		exp, err := ExpandClassBench(rules)
		if err != nil {
			t.Fatalf("read rules do not expand: %v", err)
		}
		rng := rand.New(rand.NewPCG(1, 2))
		for i := range exp {
			if err := exp[i].Match.Validate(); err != nil {
				t.Fatalf("expanded rule %s: %v", exp[i].Match.String(), err)
			}
		}
		for i := range rules {
			h := cbHeaderIn(rng, &rules[i])
			k := h.Key()
			if !rules[i].Matches(&h) {
				t.Fatalf("header %+v not inside its rule %+v", h, rules[i])
			}
			want := CBFirstMatch(rules, &h)
			if got := BruteForce(exp, &k); got == NoMatch || int(exp[got].Cookie) != want {
				t.Fatalf("header %+v: expanded rules pick %d, ClassBench %d", h, got, want)
			}
		}
	})
}

func FuzzParseSynthetic(f *testing.F) {
	for _, s := range []string{"1024,16", "2000,40,4,3,12", "10,20", "5,5,5,5,5", "300,20,0,1,6", ",", "1,1,0,1,1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		spec, err := ParseSynthetic(s)
		if err != nil {
			if spec != (SynthSpec{}) && spec.Validate() == nil {
				t.Fatalf("%q: error %v for a valid spec", s, err)
			}
			return
		}
		if spec.Validate() != nil {
			t.Fatalf("%q: parsed an invalid spec", s)
		}
		if spec.N > 300 {
			return
		}
		rules := spec.Generate(1)
		masks := map[Key]bool{}
		for i := range rules {
			masks[rules[i].Match.Mask] = true
		}
		if len(rules) != spec.N || len(masks) != spec.C {
			t.Fatalf("%q: %d rules in %d classes", s, len(rules), len(masks))
		}
		_ = SynthTraffic(spec, rules, 10, 1)
	})
}

// FuzzTableOps reads an operation sequence from the bytes and runs it on a
// small table of each algorithm, checking every answer against the model.
func FuzzTableOps(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add(bytes.Repeat([]byte{0, 0, 7, 1, 200, 3}, 30))
	f.Add(bytes.Repeat([]byte{1, 9, 0, 3, 4, 99, 120, 7}, 40))
	f.Add([]byte("the quick brown fox jumps over the lazy dog, again and again and again"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, a := range algos {
			fuzzOps(t, a, data)
		}
	})
}

func fuzzOps(t *testing.T, a Algo, data []byte) {
	src := &byteSource{b: data}
	rng := rand.New(src)
	g := newRuleGen(rand.New(rand.NewPCG(11, 11)), 6, 2)
	g.rng = rng
	tab, err := NewTable(Config{Algo: a, MaxEntries: 24, ClassCapacity: 3, minLogB: 1, minUnits: 1, families: 2, maxKicks: 20})
	if err != nil {
		t.Fatal(err)
	}
	m := newModel(24)
	var mirror *bubble.Image
	for step := 0; step < 200 && !src.empty(); step++ {
		switch op := rng.IntN(8); {
		case op < 4:
			r := g.rule(nil)
			flags := AddFlags(rng.IntN(2))
			id, rep, err := tab.Add(r, flags)
			mid, mrep, merr := m.add(r, flags)
			if !errors.Is(err, merr) || id != mid || rep != mrep {
				t.Fatalf("%v step %d: Add %d %v %v, model %d %v %v", a, step, id, rep, err, mid, mrep, merr)
			}
		case op < 6:
			s := randomSelector(rng, g, m.list())
			got := entryIDs(tab.Delete(s))
			want := m.sel(s)
			for _, id := range want {
				delete(m.rules, id)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%v step %d: Delete %v, model %v", a, step, got, want)
			}
		case op < 7:
			s := randomSelector(rng, g, m.list())
			got, want := tab.Modify(s, 5), m.sel(s)
			for _, id := range want {
				r := m.rules[id]
				r.Action = 5
				m.rules[id] = r
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%v step %d: Modify %v, model %v", a, step, got, want)
			}
		default:
			u := tab.Mirror().Sync()
			if err := u.ApplyTo(&mirror); err != nil || mirror.Diff(tab.Mirror().Image()) != "" {
				t.Fatalf("%v step %d: mirror: %v", a, step, err)
			}
		}
		rl := m.list()
		for i := 0; i < 4; i++ {
			k := g.key(rl, i%2 == 0)
			if got, _ := tab.Lookup(&k); got != m.best(&k) {
				t.Fatalf("%v step %d: Lookup %d, model %d", a, step, got, m.best(&k))
			}
		}
	}
}

// fuzzImages returns valid images of each algorithm, with a few rules.
func fuzzImages(t testing.TB) []*bubble.Image {
	var ims []*bubble.Image
	for _, a := range algos {
		tab, err := NewTable(Config{Algo: a, Seed: 1, minUnits: 2})
		if err != nil {
			t.Fatal(err)
		}
		g := newRuleGen(rand.New(rand.NewPCG(3, 3)), 5, 3)
		for i := 0; i < 12; i++ {
			_, _, _ = tab.Add(g.rule(nil), 0)
		}
		ims = append(ims, tab.Mirror().Image().Clone())
	}
	return ims
}

// corruptAndLook applies the fuzzer's writes to an image, then checks that
// NewView either refuses it or answers lookups without panicking.
func corruptAndLook(t *testing.T, im *bubble.Image, data []byte) {
	src := &byteSource{b: data}
	rng := rand.New(src)
	for !src.empty() {
		r := rng.IntN(len(im.Words))
		switch rng.IntN(8) {
		case 0:
			if n := len(im.Words[r]); n > 0 {
				im.Words[r] = im.Words[r][:rng.IntN(n)]
			}
		case 1:
			im.Words[r] = append(im.Words[r], rng.Uint32())
		default:
			if n := len(im.Words[r]); n > 0 {
				v := rng.Uint32()
				if rng.IntN(2) == 0 {
					v %= 64
				}
				im.Words[r][rng.IntN(n)] = v
			}
		}
	}
	v, err := NewView(im)
	if err != nil {
		return
	}
	var pk [KeyWords]uint32
	out := make([]RuleID, 4)
	for i := 0; i < 8; i++ {
		for j := range pk {
			pk[j] = rng.Uint32()
		}
		v.Lookup(pk[:])
		v.MatchAll(pk[:], nil)
		_ = v.LookupBatchSoA(pk[:], 4, out)
		// bubbles after the view was made: still no panic
		r := rng.IntN(len(im.Words))
		if n := len(im.Words[r]); n > 0 {
			im.Words[r][rng.IntN(n)] = rng.Uint32()
		}
	}
}

func FuzzNewView(f *testing.F) {
	f.Add(uint8(0), []byte{})
	f.Add(uint8(1), []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	f.Add(uint8(2), bytes.Repeat([]byte{4, 0, 0, 0, 200, 0, 0, 0, 9, 0, 0, 0}, 10))
	f.Add(uint8(1), bytes.Repeat([]byte{5, 3, 0, 0, 1}, 30))
	ims := fuzzImages(f)
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		corruptAndLook(t, ims[int(which)%len(ims)].Clone(), data)
	})
}

// TestCorruptImages runs many random corruptions (what FuzzNewView explores
// further) and checks a few that must be refused.
func TestCorruptImages(t *testing.T) {
	ims := fuzzImages(t)
	rng := rand.New(rand.NewPCG(8, 8))
	for i := 0; i < 3000; i++ {
		data := make([]byte, rng.IntN(64))
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		corruptAndLook(t, ims[i%len(ims)].Clone(), data)
	}
	for _, im := range ims {
		if _, err := NewView(im); err != nil {
			t.Fatalf("valid image refused: %v", err)
		}
		for i, bad := range []func(*bubble.Image){
			func(im *bubble.Image) { im.Words[RegionHeader][HdrMagic]++ },
			func(im *bubble.Image) { im.Words[RegionHeader][HdrP] = 28 },
			func(im *bubble.Image) { im.Words[RegionHeader][HdrCount] = 1 << 30 },
			func(im *bubble.Image) { im.Words = im.Words[:3] },
			func(im *bubble.Image) { im.Words[RegionEntries] = nil },
		} {
			c := im.Clone()
			bad(c)
			if _, err := NewView(c); err == nil {
				t.Errorf("%s image: corruption %d accepted", Algo(im.Words[RegionHeader][HdrAlgo]), i)
			}
		}
	}
	if _, err := NewView(nil); err == nil {
		t.Error("nil image accepted")
	}
}

func FuzzSetField(f *testing.F) {
	f.Add(uint8(11), []byte{10, 0, 0, 0}, []byte{255, 0, 0, 0})
	f.Add(uint8(6), []byte{0x10, 0x05}, []byte{})
	f.Add(uint8(26), bytes.Repeat([]byte{0x20}, 16), bytes.Repeat([]byte{0xff}, 16))
	f.Add(uint8(42), []byte{0, 2}, []byte{0, 2})
	f.Add(uint8(40), []byte{1}, []byte{1})
	f.Fuzz(func(t *testing.T, fb uint8, value, mask []byte) {
		var m Match
		_ = m.SetExact(FieldEthType, EthTypeIPv4)
		fld := Field(fb % 45)
		if len(mask) == 0 {
			mask = nil
		}
		before := m
		if err := m.SetField(fld, value, mask); err != nil {
			if m != before || !errors.Is(err, ErrBadMatch) {
				t.Fatalf("failed SetField changed the match or error %v is untyped", err)
			}
			return
		}
		v, mk := m.Get(fld)
		if !bytes.Equal(v, value) || (mask != nil && !bytes.Equal(mk, mask)) {
			t.Fatalf("Get(%v) = %x/%x after setting %x/%x", fld, v, mk, value, mask)
		}
		if m.Validate() == nil {
			back, err := ParseMatch(m.String())
			if err != nil || back != m {
				t.Fatalf("%q does not read back: %v", m.String(), err)
			}
		}
		_ = m.CheckField(fld)
	})
}

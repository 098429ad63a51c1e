package gpu

import (
	"bytes"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gswitch/gswitch/tables/pubsub"
)

// evalEncoded is pubsub_match (kernels/pubsub.cu) in Go, over a layout's
// words and an encoded batch: the kernel's reference for the encoding and
// the comparison rules, checked against the CPU matcher below.
func evalEncoded(l *pubsub.Layout, b *EventBatch) {
	w := l.Image.Words
	cons, filters := w[pubsub.RegionConstraints], w[pubsub.RegionFilters]
	strs := make([]byte, 4*len(w[pubsub.RegionStrings]))
	for i, x := range w[pubsub.RegionStrings] {
		strs[4*i], strs[4*i+1], strs[4*i+2], strs[4*i+3] = byte(x), byte(x>>8), byte(x>>16), byte(x>>24)
	}
	cls := func(t uint32) uint32 {
		if t == 2 {
			return 1
		}
		return t
	}
	asF := func(t, lo, hi uint32) float64 {
		v := uint64(hi)<<32 | uint64(lo)
		if t == 1 {
			return float64(int64(v))
		}
		return math.Float64frombits(v)
	}
	for k := 0; k < b.N; k++ {
		count := map[uint32]uint32{}
		for a := b.Off[k]; a < b.Off[k+1]; a++ {
			r := b.Attrs[AttrWords*a:]
			ni, at, alo, ahi := r[0], r[1], r[2], r[3]
			off, n := w[pubsub.RegionNames][2*ni], w[pubsub.RegionNames][2*ni+1]
			for i := off; i < off+n; i++ {
				c := cons[3*i : 3*i+3]
				ct, op := c[0]>>4&15, c[0]&15
				if cls(at) != cls(ct) {
					continue
				}
				var x, y []byte
				if cls(at) == 3 {
					x, y = b.Str[alo:alo+ahi], strs[c[1]:c[1]+c[2]]
				}
				var ok bool
				switch op {
				case 6:
					ok = bytes.HasPrefix(x, y)
				case 7:
					ok = bytes.HasSuffix(x, y)
				case 8:
					ok = bytes.Contains(x, y)
				default:
					var rr int
					switch {
					case cls(at) == 3:
						rr = bytes.Compare(x, y)
					case cls(at) == 1 && !(at == 1 && ct == 1):
						fx, fy := asF(at, alo, ahi), asF(ct, c[1], c[2])
						rr = map[bool]int{true: -1, false: 0}[fx < fy] + map[bool]int{true: 1, false: 0}[fx > fy]
					default:
						ix, iy := int64(uint64(ahi)<<32|uint64(alo)), int64(uint64(c[2])<<32|uint64(c[1]))
						rr = map[bool]int{true: -1, false: 0}[ix < iy] + map[bool]int{true: 1, false: 0}[ix > iy]
					}
					ok = [6]bool{rr == 0, rr != 0, rr < 0, rr <= 0, rr > 0, rr >= 0}[op]
				}
				if ok {
					count[c[0]>>8]++
				}
			}
		}
		out := b.Out[k*b.PortWords : (k+1)*b.PortWords]
		clear(out)
		for s, n := range count {
			if f := filters[s]; f&0xff == n {
				out[(f>>8)/32] |= 1 << ((f >> 8) % 32)
			}
		}
	}
}

// TestEncodeEvents encodes random events (every type, repeated and unknown
// names), evaluates them as the kernel does (evalEncoded) and wants the
// CPU matcher's answers; batches too small take fewer events.
func TestEncodeEvents(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	words := []string{"", "a", "ab", "abc", "b", "hello", "help", "lo"}
	var text strings.Builder
	names := []string{"i", "f", "s", "b"}
	for p := 1; p <= 40; p++ {
		for f := 0; f < 20; f++ {
			if f > 0 {
				text.WriteString(" || ")
			} else {
				text.WriteString(string(rune('0'+p/10)) + string(rune('0'+p%10)) + ": ")
			}
			for k := 0; k <= rng.IntN(3); k++ {
				if k > 0 {
					text.WriteString(" && ")
				}
				switch n := names[rng.IntN(4)]; n {
				case "i", "f":
					text.WriteString(n + []string{" = ", " != ", " < ", " <= ", " > ", " >= "}[rng.IntN(6)] +
						[]string{"1", "2", "1.5", "-3", "0"}[rng.IntN(5)])
				case "s":
					text.WriteString(n + []string{" = ", " != ", " < ", " >= ", " ^= ", " $= ", " *= "}[rng.IntN(7)] +
						`"` + words[rng.IntN(len(words))] + `"`)
				case "b":
					text.WriteString(n + []string{" = ", " != "}[rng.IntN(2)] + []string{"true", "false"}[rng.IntN(2)])
				}
			}
		}
		text.WriteString("\n")
	}
	specs, err := pubsub.Parse(text.String())
	if err != nil {
		t.Fatal(err)
	}
	tb := pubsub.New()
	if _, err := tb.AddSpecs(specs); err != nil {
		t.Fatal(err)
	}
	l := tb.Layout()
	vals := []pubsub.Value{pubsub.Int(1), pubsub.Int(2), pubsub.Int(-3), pubsub.Float(1.5), pubsub.Float(2), pubsub.Bool(true),
		pubsub.Bool(false), pubsub.Str(""), pubsub.Str("help"), pubsub.Str("hello"), pubsub.Str("ab"), pubsub.Str("lo")}
	evs := make([]pubsub.Event, 3000)
	for i := range evs {
		for _, n := range rng.Perm(5)[:1+rng.IntN(5)] { // distinct names, as Event.Validate wants
			evs[i].Attrs = append(evs[i].Attrs, pubsub.Attr{Name: []string{"i", "f", "s", "b", "x"}[n], Value: vals[rng.IntN(len(vals))]})
		}
	}
	ports := l.Image.Words[pubsub.RegionPorts]
	pw := max(1, (len(ports)+31)/32)
	b := &EventBatch{Off: make([]uint32, 501), Attrs: make([]uint32, AttrWords*2000), Str: make([]byte, 900), Out: make([]uint32, 500*pw), PortWords: pw}
	var got [][]uint32
	for rest := evs; len(rest) > 0; {
		k := EncodeEvents(b, l.Names, rest)
		if k == 0 {
			t.Fatal("nothing encoded")
		}
		evalEncoded(l, b)
		if got, err = DecodePorts(got, b, ports); err != nil {
			t.Fatal(err)
		}
		rest = rest[k:]
	}
	want := tb.MatchBatch(evs, nil)
	for i := range evs {
		if !slices.Equal(got[i], want[i]) && len(got[i])+len(want[i]) > 0 {
			t.Fatalf("event %d %s: %v, want %v", i, evs[i].String(), got[i], want[i])
		}
	}
}

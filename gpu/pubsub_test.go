package gpu

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gswitch/gswitch/tables/pubsub"
)

// evalEncoded is pubsub_match (kernels/pubsub.cu) in Go over an encoded
// batch: the attributes read back from the batch's words, matched by
// pubsub.EvalLayoutAttrs (the kernel's twin over the layout's words), the
// port bits and the deciding slots written where the kernel writes them.
func evalEncoded(l *pubsub.Layout, b *EventBatch) {
	o := b.N * b.PortWords
	clear(b.Out[:o+1])
	for k := 0; k < b.N; k++ {
		var attrs []pubsub.LayoutAttr
		for a := b.Off[k]; a < b.Off[k+1]; a++ {
			r := b.Attrs[AttrWords*a:]
			la := pubsub.LayoutAttr{Name: r[0], Type: r[1], Lo: r[2], Hi: r[3]}
			if r[1] == uint32(pubsub.TypeString) {
				la.Str = b.Str[r[2] : r[2]+r[3]]
			}
			attrs = append(attrs, la)
		}
		out := b.Out[k*b.PortWords : (k+1)*b.PortWords]
		pubsub.EvalLayoutAttrs(l.Image, attrs, func(slot, pi uint32) {
			if bit := uint32(1) << (pi % 32); out[pi/32]&bit == 0 {
				out[pi/32] |= bit
				if h := b.Out[o]; int(h) < min(hitCap(b.N), len(b.Out)-o-1) {
					b.Out[o+1+int(h)] = slot
				}
				b.Out[o]++
			}
		})
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
	b := &EventBatch{Off: make([]uint32, 501), Attrs: make([]uint32, AttrWords*2000), Str: make([]byte, 900), Out: make([]uint32, 500*pw+1+hitCap(500)), PortWords: pw}
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
		hits, all := b.Hits()
		delivered := 0
		for _, ps := range got[len(got)-b.N:] {
			delivered += len(ps)
		}
		if all != (delivered <= hitCap(b.N)) || len(hits) != min(delivered, hitCap(b.N)) {
			t.Fatalf("%d deciding slots (all %v) for %d deliveries", len(hits), all, delivered)
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

// TestDecodeFlat checks the small-batch path's decoding (one allocation)
// against decodeInto on random answer words, repeated port numbers
// included.
func TestDecodeFlat(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	ports := []uint32{7, 3, 3, 90, 1, 2, 64, 5, 7, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36}
	for iter := 0; iter < 200; iter++ {
		b := &EventBatch{N: 1 + rng.IntN(16), PortWords: 2}
		b.Out = make([]uint32, b.N*b.PortWords+1)
		for i := range b.Out[:b.N*b.PortWords] {
			if rng.IntN(3) > 0 {
				b.Out[i] = rng.Uint32()
			}
			if i%2 == 1 {
				b.Out[i] &= 7 // ports 32..34 only
			}
		}
		want := make([][]uint32, b.N)
		got := make([][]uint32, b.N)
		if err := decodeInto(want, b, ports); err != nil {
			t.Fatal(err)
		}
		if err := decodeFlat(got, b, ports); err != nil {
			t.Fatal(err)
		}
		for k := range want {
			if !slices.Equal(got[k], want[k]) {
				t.Fatalf("event %d: decodeFlat %v, decodeInto %v", k, got[k], want[k])
			}
		}
	}
	b := &EventBatch{N: 1, PortWords: 2, Out: []uint32{0, 1 << 10, 0}}
	if err := decodeFlat(make([][]uint32, 1), b, ports); err == nil {
		t.Error("a port index past the ports region decoded")
	}
}

// TestParseSmallMode checks that every small-batch mode's name parses back
// to it and that other names are refused.
func TestParseSmallMode(t *testing.T) {
	for _, m := range []SmallMode{SmallOff, SmallCopy, SmallMapped, SmallFlag, SmallGraph} {
		got, err := ParseSmallMode(m.String())
		if err != nil || got != m {
			t.Errorf("ParseSmallMode(%q) = %v, %v", m.String(), got, err)
		}
	}
	for _, s := range []string{"", "Copy", "graphs", "SmallMode(9)"} {
		if _, err := ParseSmallMode(s); err == nil {
			t.Errorf("ParseSmallMode(%q): no error", s)
		}
	}
}

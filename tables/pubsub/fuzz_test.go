package pubsub

import (
	"bytes"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// FuzzParse: the parser never panics, an error is a *SyntaxError with a
// position inside the text, and what it accepts formats to text that parses
// to the same subscriptions.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"1: a = 1\n", "2: s ^= \"x\\x41\" || t != true && u <= -1.5e3 # c\n", "# only a comment\n\n",
		"1: a = 1 &&", "1: a ^= 5", "3:a=\"\\q\"", "4294967296: a = 1", "1: true = false\r\n1: b *= \"\"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		specs, err := Parse(text)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) || se.Line < 1 || se.Col < 1 || se.Line > strings.Count(text, "\n")+1 {
				t.Fatalf("Parse(%q): error %v without a valid position", text, err)
			}
			return
		}
		var b strings.Builder
		for _, s := range specs {
			for _, fl := range s.Filters {
				if err := fl.Validate(); err != nil {
					t.Fatalf("Parse(%q) accepted an invalid filter: %v", text, err)
				}
			}
			b.WriteString(s.String() + "\n")
		}
		again, err := Parse(b.String())
		if err != nil {
			t.Fatalf("reparse of %q (from %q): %v", b.String(), text, err)
		}
		if len(again) != len(specs) {
			t.Fatalf("reparse: %d specs, want %d", len(again), len(specs))
		}
		for i := range again {
			again[i].Line = specs[i].Line
		}
		if !reflect.DeepEqual(again, specs) {
			t.Fatalf("reparse of %q differs:\n%v\n%v", b.String(), again, specs)
		}
	})
}

// FuzzDecodeWire: the decoder never panics, rejects with ErrWire, and what it
// accepts encodes back to the same bytes.
func FuzzDecodeWire(f *testing.F) {
	for _, e := range []Event{
		{},
		{Attrs: []Attr{{"i", Int(-2)}, {"f", Float(1.5)}, {"s", Str("hi")}, {"b", Bool(true)}}},
		{Attrs: []Attr{{"x.y", Str("")}, {"n", Int(1 << 62)}}},
	} {
		b, err := e.AppendWire(nil)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("GSEV\x01\x00\xff\xff"))
	f.Add([]byte("GSEV\x01\x00\x00\x01\x01f\x02\x7f\xf8\x00\x00\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := DecodeWire(b)
		if err != nil {
			if !errors.Is(err, ErrWire) {
				t.Fatalf("error %v does not wrap ErrWire", err)
			}
			return
		}
		out, err := e.AppendWire(nil)
		if err != nil {
			t.Fatalf("decoded event does not encode: %v", err)
		}
		if !bytes.Equal(out, b) {
			t.Fatalf("re-encoding differs:\n%x\n%x", out, b)
		}
	})
}

// FuzzDecodeJSON: the JSON decoder never panics and what it accepts is a
// valid event that survives AppendJSON.
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{`{"a": 1, "b": 1.5, "c": "x", "d": true}`, `{"a": {"b": 1}}`, `{"a": null}`, `[]`, `{"a": 1e400}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := DecodeJSON(b)
		if err != nil {
			return
		}
		if err := e.Validate(); err != nil {
			t.Fatalf("accepted an invalid event: %v", err)
		}
		if !strings.Contains(string(b), "\\") && !strings.ContainsRune(string(b), 0xfffd) {
			again, err := DecodeJSON(e.AppendJSON(nil))
			if err != nil || len(again.Attrs) != len(e.Attrs) {
				t.Fatalf("AppendJSON round trip: %v", err)
			}
		}
	})
}

// FuzzMatch: for subscriptions and an event from the fuzzer, the matcher
// and the layout agree with the brute-force evaluator.
func FuzzMatch(f *testing.F) {
	f.Add("1: a = 1 && b != \"x\"\n2: a > 0.5 || c ^= \"\"", []byte("GSEV\x01\x00\x00\x01\x01a\x01\x00\x00\x00\x00\x00\x00\x00\x01"))
	f.Add("1: a != 1\n1: a *= \"b\"", []byte("GSEV\x01\x00\x00\x01\x01a\x03\x02ab"))
	f.Fuzz(func(t *testing.T, text string, ev []byte) {
		specs, err := Parse(text)
		if err != nil || len(specs) > 50 {
			return
		}
		e, err := DecodeWire(ev)
		if err != nil {
			return
		}
		tb := New()
		if _, err := tb.AddSpecs(specs); err != nil {
			t.Fatal(err)
		}
		want := BruteMatch(specs, &e)
		if got := tb.Match(&e); !slices.Equal(got, want) {
			t.Fatalf("matcher %v, brute %v", got, want)
		}
		if got := EvalLayout(tb.Layout(), &e); !slices.Equal(got, want) {
			t.Fatalf("layout %v, brute %v", got, want)
		}
	})
}

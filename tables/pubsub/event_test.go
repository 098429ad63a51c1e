package pubsub

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestDecodeJSON(t *testing.T) {
	e, err := DecodeJSON([]byte(`{"i": 7, "n": -9223372036854775808, "f": 1.0, "g": 2e3, "s": "x\u00e9", "b": false, "t": true}`))
	if err != nil {
		t.Fatal(err)
	}
	want := Event{Attrs: []Attr{
		{"i", Int(7)}, {"n", Int(math.MinInt64)}, {"f", Float(1)}, {"g", Float(2000)},
		{"s", Str("x\u00e9")}, {"b", Bool(false)}, {"t", Bool(true)},
	}}
	if !reflect.DeepEqual(e, want) {
		t.Fatalf("got %v, want %v", e.String(), want.String())
	}
	// AppendJSON reads back as the same event.
	again, err := DecodeJSON(e.AppendJSON(nil))
	if err != nil || !reflect.DeepEqual(again, e) {
		t.Fatalf("round trip: %v %v", again.String(), err)
	}
}

func TestDecodeJSONErrors(t *testing.T) {
	for _, c := range []struct{ in, msg string }{
		{`{"a": {"b": 1}}`, "nested objects"},
		{`{"a": [1]}`, "nested arrays"},
		{`{"a": null}`, "null"},
		{`[1]`, "expected a JSON object"},
		{`7`, "expected a JSON object"},
		{`{"a": 1, "a": 2}`, "twice"},
		{`{"a": 9223372036854775808}`, "out of the 64-bit range"},
		{`{"a": 1e999}`, "out of the 64-bit range"},
		{`{"a": 1} {"b": 2}`, "after the object"},
		{`{"a": 1`, "EOF"},
		{`{"": 1}`, "name of 0 bytes"},
		{`{"a": "` + strings.Repeat("x", 256) + `"}`, "string of 256 bytes"},
		{``, "EOF"},
	} {
		_, err := DecodeJSON([]byte(c.in))
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("DecodeJSON(%s) = %v, want an error with %q", c.in, err, c.msg)
		}
	}
}

func TestReadJSONEvents(t *testing.T) {
	evs, err := ReadJSONEvents(strings.NewReader("{\"a\": 1}\n\n  \n{\"b\": \"x\"}"))
	if err != nil || len(evs) != 2 {
		t.Fatalf("%v %v", evs, err)
	}
	_, err = ReadJSONEvents(strings.NewReader("{\"a\": 1}\n{\"a\": [1]}\n"))
	if err == nil || !strings.HasPrefix(err.Error(), "line 2:") {
		t.Fatalf("error %v, want one on line 2", err)
	}
}

// TestWireGolden pins the encoding byte for byte.
func TestWireGolden(t *testing.T) {
	e := Event{Attrs: []Attr{{"i", Int(-2)}, {"f", Float(1.5)}, {"s", Str("hi")}, {"b", Bool(true)}}}
	b, err := e.AppendWire(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := "47534556" + "01" + "00" + "0004" +
		"01" + "69" + "01" + "fffffffffffffffe" +
		"01" + "66" + "02" + "3ff8000000000000" +
		"01" + "73" + "03" + "02" + "6869" +
		"01" + "62" + "04" + "01"
	if got := hex.EncodeToString(b); got != want {
		t.Fatalf("encoding\n%s\nwant\n%s", got, want)
	}
	d, err := DecodeWire(b)
	if err != nil || !reflect.DeepEqual(d, e) {
		t.Fatalf("decode: %v %v", d.String(), err)
	}
	empty, _ := (&Event{}).AppendWire(nil)
	if d, err := DecodeWire(empty); err != nil || len(d.Attrs) != 0 {
		t.Fatalf("empty event: %v %v", d, err)
	}
}

func TestWireErrors(t *testing.T) {
	good, _ := (&Event{Attrs: []Attr{{"a", Int(1)}, {"s", Str("xy")}}}).AppendWire(nil)
	mod := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	for _, c := range []struct {
		name string
		in   []byte
		msg  string
	}{
		{"empty", nil, "shorter than"},
		{"magic", mod(func(b []byte) []byte { b[0] = 'X'; return b }), "magic"},
		{"version", mod(func(b []byte) []byte { b[4] = 2; return b }), "version"},
		{"flags", mod(func(b []byte) []byte { b[5] = 1; return b }), "flags"},
		{"count too big", mod(func(b []byte) []byte { b[6], b[7] = 0xff, 0xff; return b }), "attributes"},
		{"count larger than data", mod(func(b []byte) []byte { b[7] = 5; return b }), "cannot fit"},
		{"truncated", good[:len(good)-1], "truncated"},
		{"trailing", append(bytes.Clone(good), 0), "after the last"},
		{"empty name", mod(func(b []byte) []byte { b[8] = 0; return b }), "empty name"},
		{"type", mod(func(b []byte) []byte { b[10] = 9; return b }), "unknown type"},
		{"duplicate", mod(func(b []byte) []byte { b[20] = 'a'; return b }), "twice"},
		{"bool byte", []byte("GSEV\x01\x00\x00\x01\x01b\x04\x02"), "boolean"},
		{"NaN", []byte("GSEV\x01\x00\x00\x01\x01f\x02\x7f\xf8\x00\x00\x00\x00\x00\x00"), "NaN"},
	} {
		_, err := DecodeWire(c.in)
		if !errors.Is(err, ErrWire) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: DecodeWire = %v, want ErrWire with %q", c.name, err, c.msg)
		}
	}
	if _, err := (&Event{Attrs: []Attr{{"a", Float(math.NaN())}}}).AppendWire(nil); err == nil {
		t.Error("NaN encoded")
	}
}

package pubsub

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	text := "# comment\n\n  1 :x = 5 && y.z-w_2 != \"a\\\"b\\\\c\\n\\t\\x41\" # trailing\n" +
		"2: s ^= \"ab\" || s $= \"\" || s *= \"x\"\t&&\tf >= -1.5e3\r\n" +
		"1: true = true && false != false && n < +7 && m <= 1. && k > .5 && j >= 2E-2\n" +
		"\t \n" +
		"3:a=1&&b=\"#\"||c=-9223372036854775808\n"
	specs, err := Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	want := []Spec{
		{Port: 1, Line: 3, Filters: []Filter{{
			{"x", OpEq, Int(5)}, {"y.z-w_2", OpNe, Str("a\"b\\c\n\tA")}}}},
		{Port: 2, Line: 4, Filters: []Filter{
			{{"s", OpPrefix, Str("ab")}},
			{{"s", OpSuffix, Str("")}},
			{{"s", OpContains, Str("x")}, {"f", OpGe, Float(-1500)}}}},
		{Port: 1, Line: 5, Filters: []Filter{{
			{"true", OpEq, Bool(true)}, {"false", OpNe, Bool(false)}, {"n", OpLt, Int(7)},
			{"m", OpLe, Float(1)}, {"k", OpGt, Float(0.5)}, {"j", OpGe, Float(0.02)}}}},
		{Port: 3, Line: 7, Filters: []Filter{
			{{"a", OpEq, Int(1)}, {"b", OpEq, Str("#")}},
			{{"c", OpEq, Int(math.MinInt64)}}}},
	}
	if !reflect.DeepEqual(specs, want) {
		t.Fatalf("got\n%#v\nwant\n%#v", specs, want)
	}
	// Formatting and parsing again gives the same subscriptions.
	var b strings.Builder
	for _, s := range specs {
		b.WriteString(s.String() + "\n")
	}
	again, err := Parse(b.String())
	if err != nil {
		t.Fatalf("reparse %q: %v", b.String(), err)
	}
	for i := range again {
		again[i].Line = specs[i].Line
	}
	if !reflect.DeepEqual(again, specs) {
		t.Fatalf("reparse of\n%s\ngave %v", b.String(), again)
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		text      string
		line, col int
		msg       string
	}{
		{"x: a = 1", 1, 1, "port"},
		{"1 a = 1", 1, 3, "':'"},
		{"1:", 1, 3, "predicate"},
		{"1: # nothing", 1, 4, "predicate"},
		{"\n\n1: a", 3, 5, "operator"},
		{"1: a =", 1, 7, "value"},
		{"1: a = ", 1, 8, "value"},
		{"1: = 1", 1, 4, "name"},
		{"1: a ^= 5", 1, 6, "^= does not apply to a int"},
		{"1: a < true", 1, 6, "< does not apply to a bool"},
		{"1: a *= 1.5", 1, 6, "does not apply"},
		{"1: a = tru", 1, 8, "invalid value"},
		{"1: a = 1x", 1, 8, "invalid value"},
		{"1: a = 1-2", 1, 8, "invalid value"},
		{"1: a = 9223372036854775808", 1, 8, "out of the 64-bit range"},
		{"1: a = 1e999", 1, 8, "out of the 64-bit range"},
		{"1: a = \"abc", 1, 8, "unterminated string"},
		{"1: a = \"\\q\"", 1, 9, "unknown escape"},
		{"1: a = \"\\x4\"", 1, 9, "hex"},
		{"1: a = 1 b = 2", 1, 10, "&&, ||"},
		{"1: a = 1 &&", 1, 12, "name"},
		{"1: a = 1 ||", 1, 12, "name"},
		{"1: a = 1 | b = 2", 1, 10, "&&, ||"},
		{"1: a = 1)", 1, 9, "&&, ||"},
		{"4294967296: a = 1", 1, 1, "out of range"},
		{"1: a = \"" + strings.Repeat("x", 256) + "\"", 1, 8, "at most 255"},
		{"1: " + strings.Repeat("a", 256) + " = 1", 1, 4, "at most 255"},
		{"1: a == 1", 1, 7, "expected a value"},
		{"1: a = 1 &&& b = 2", 1, 12, "name"},
	}
	for _, c := range cases {
		_, err := Parse(c.text)
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("Parse(%q) = %v, want a syntax error", c.text, err)
			continue
		}
		if se.Line != c.line || se.Col != c.col || !strings.Contains(se.Msg, c.msg) {
			t.Errorf("Parse(%q) = %v, want line %d, column %d, %q", c.text, err, c.line, c.col, c.msg)
		}
	}
}

func TestParseFilterLimit(t *testing.T) {
	parts := make([]string, MaxFilter+1)
	for i := range parts {
		parts[i] = "a = 1"
	}
	if _, err := Parse("1: " + strings.Join(parts, " && ")); err == nil {
		t.Fatal("a filter of 256 constraints was accepted")
	}
	if _, err := Parse("1: " + strings.Join(parts[1:], " && ")); err != nil {
		t.Fatalf("a filter of 255 constraints: %v", err)
	}
}

func TestParsePredicate(t *testing.T) {
	fs, err := ParsePredicate(` a = 1 || b != "x" `)
	if err != nil || len(fs) != 2 {
		t.Fatalf("ParsePredicate: %v %v", fs, err)
	}
	for _, bad := range []string{"", "  ", "a = 1\nb = 2", "1: a = 1"} {
		if _, err := ParsePredicate(bad); err == nil {
			t.Errorf("ParsePredicate(%q) succeeded", bad)
		}
	}
}

func TestValueString(t *testing.T) {
	for _, c := range []struct {
		v    Value
		want string
	}{
		{Int(-3), "-3"}, {Float(2), "2.0"}, {Float(1e300), "1e+300"}, {Float(-0.25), "-0.25"},
		{Str("a\"\\\n\t\x01"), `"a\"\\\n\t\x01"`}, {Bool(true), "true"}, {Bool(false), "false"},
	} {
		if got := c.v.String(); got != c.want {
			t.Errorf("%#v.String() = %s, want %s", c.v, got, c.want)
		}
	}
}

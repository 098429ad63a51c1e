package pubsub

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Type is the type of an attribute value.
type Type uint8

// The value types. Int and Float are both numbers; a constraint on a number
// applies to an attribute of either numeric type.
const (
	TypeInt    Type = 1
	TypeFloat  Type = 2
	TypeString Type = 3
	TypeBool   Type = 4
)

func (t Type) String() string {
	switch t {
	case TypeInt:
		return "int"
	case TypeFloat:
		return "float"
	case TypeString:
		return "string"
	case TypeBool:
		return "bool"
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// class folds the two numeric types into one: values of one class compare,
// values of different classes never satisfy a constraint.
func (t Type) class() Type {
	if t == TypeFloat {
		return TypeInt
	}
	return t
}

// MaxString is the longest string value, in bytes.
const MaxString = 255

// MaxName is the longest attribute name, in bytes.
const MaxName = 255

// Value is a typed attribute or constraint value. Int holds an integer, or a
// boolean as 0 or 1; Float a float; Str a string. Float values are never NaN.
type Value struct {
	Type  Type
	Int   int64
	Float float64
	Str   string
}

// Int returns an integer value.
func Int(v int64) Value { return Value{Type: TypeInt, Int: v} }

// Float returns a float value; NaN is not a value (the parsers and decoders
// reject it).
func Float(v float64) Value { return Value{Type: TypeFloat, Float: v} }

// String returns a string value.
func Str(v string) Value { return Value{Type: TypeString, Str: v} }

// Bool returns a boolean value.
func Bool(v bool) Value {
	if v {
		return Value{Type: TypeBool, Int: 1}
	}
	return Value{Type: TypeBool}
}

// asFloat returns a number as float64.
func (v Value) asFloat() float64 {
	if v.Type == TypeInt {
		return float64(v.Int)
	}
	return v.Float
}

// String formats the value in the subscription language's syntax: integers
// in decimal, floats always with a '.' or an exponent, strings quoted with
// escapes, booleans as true or false.
func (v Value) String() string {
	switch v.Type {
	case TypeInt:
		return strconv.FormatInt(v.Int, 10)
	case TypeFloat:
		if math.IsInf(v.Float, 0) || math.IsNaN(v.Float) {
			return fmt.Sprint(v.Float) // not expressible in the language
		}
		s := strconv.FormatFloat(v.Float, 'g', -1, 64)
		if !strings.ContainsAny(s, ".e") {
			s += ".0"
		}
		return s
	case TypeString:
		return quote(v.Str)
	case TypeBool:
		if v.Int != 0 {
			return "true"
		}
		return "false"
	}
	return "?"
}

func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			b.WriteString(`\"`)
		case c == '\\':
			b.WriteString(`\\`)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\t':
			b.WriteString(`\t`)
		case c < 0x20 || c >= 0x7f || c == '#':
			fmt.Fprintf(&b, `\x%02x`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// Op is a constraint operator.
type Op uint8

// The operators.
const (
	OpEq       Op = iota // =
	OpNe                 // !=
	OpLt                 // <
	OpLe                 // <=
	OpGt                 // >
	OpGe                 // >=
	OpPrefix             // ^=
	OpSuffix             // $=
	OpContains           // *=
	numOps
)

var opNames = [numOps]string{"=", "!=", "<", "<=", ">", ">=", "^=", "$=", "*="}

func (o Op) String() string {
	if o < numOps {
		return opNames[o]
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Applies reports whether operator o applies to values of type t: = and !=
// to every type, the orderings to numbers and strings, ^= $= *= to strings.
func (o Op) Applies(t Type) bool {
	switch o {
	case OpEq, OpNe:
		return t >= TypeInt && t <= TypeBool
	case OpLt, OpLe, OpGt, OpGe:
		return t == TypeInt || t == TypeFloat || t == TypeString
	case OpPrefix, OpSuffix, OpContains:
		return t == TypeString
	}
	return false
}

// Constraint is one test NAME OP VALUE on an event.
type Constraint struct {
	Name  string
	Op    Op
	Value Value
}

func (c Constraint) String() string { return c.Name + " " + c.Op.String() + " " + c.Value.String() }

// Validate checks that the constraint is well formed: a name of the
// language's characters, an operator that applies to the value's type, a
// string no longer than MaxString, no NaN.
func (c Constraint) Validate() error { return c.validate() }

func (c *Constraint) validate() error {
	if err := validName(c.Name); err != nil {
		return err
	}
	if c.Op >= numOps {
		return fmt.Errorf("pubsub: unknown operator %d", c.Op)
	}
	if !c.Op.Applies(c.Value.Type) {
		return fmt.Errorf("pubsub: operator %s does not apply to a %s value", c.Op, c.Value.Type)
	}
	if c.Value.Type == TypeString && len(c.Value.Str) > MaxString {
		return fmt.Errorf("pubsub: string value of %d bytes (at most %d)", len(c.Value.Str), MaxString)
	}
	if c.Value.Type == TypeFloat && math.IsNaN(c.Value.Float) {
		return fmt.Errorf("pubsub: NaN is not a value")
	}
	if c.Value.Type == TypeBool && c.Value.Int != 0 && c.Value.Int != 1 {
		return fmt.Errorf("pubsub: boolean value %d", c.Value.Int)
	}
	return nil
}

func nameChar(c byte) bool { return nameChars[c] }

// nameChars marks the bytes of names: letters, digits, _ . -.
var nameChars = func() (t [256]bool) {
	for c := 0; c < 256; c++ {
		t[c] = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-'
	}
	return t
}()

func validName(s string) error {
	if s == "" || len(s) > MaxName {
		return fmt.Errorf("pubsub: name of %d bytes (1 to %d)", len(s), MaxName)
	}
	for i := 0; i < len(s); i++ {
		if !nameChar(s[i]) {
			return fmt.Errorf("pubsub: name %q: byte %#x is not a letter, digit, _ . or -", s, s[i])
		}
	}
	return nil
}

// MaxFilter is the most constraints one filter may have (the matcher's
// per-filter counters are 8 bits wide).
const MaxFilter = 255

// Filter is a conjunction of constraints.
type Filter []Constraint

func (f Filter) String() string {
	parts := make([]string, len(f))
	for i, c := range f {
		parts[i] = c.String()
	}
	return strings.Join(parts, " && ")
}

// Validate checks every constraint and the filter's size (1..MaxFilter).
func (f Filter) Validate() error {
	if len(f) == 0 || len(f) > MaxFilter {
		return fmt.Errorf("pubsub: filter of %d constraints (1 to %d)", len(f), MaxFilter)
	}
	for k := range f {
		if err := f[k].validate(); err != nil {
			return err
		}
	}
	return nil
}

// FormatPredicate formats a disjunction of filters.
func FormatPredicate(fs []Filter) string {
	parts := make([]string, len(fs))
	for i, f := range fs {
		parts[i] = f.String()
	}
	return strings.Join(parts, " || ")
}

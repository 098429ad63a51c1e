package pubsub

import (
	"cmp"
	"slices"
	"strings"
)

// This file is the semantics, written as plainly as possible: the oracle the
// indexed matcher and the device layout are tested against.

// Get returns the value of the event's attribute name.
func (e *Event) Get(name string) (Value, bool) {
	for i := range e.Attrs {
		if e.Attrs[i].Name == name {
			return e.Attrs[i].Value, true
		}
	}
	return Value{}, false
}

// compareValues compares two values of one class: numbers as integers when
// both are integers, else as float64; strings in byte order; booleans false <
// true.
func compareValues(a, b Value) int {
	if a.Type == TypeInt && b.Type == TypeInt {
		return cmp.Compare(a.Int, b.Int)
	}
	if a.Type.class() == TypeInt {
		return cmp.Compare(a.asFloat(), b.asFloat())
	}
	if a.Type == TypeString {
		return strings.Compare(a.Str, b.Str)
	}
	return cmp.Compare(a.Int, b.Int)
}

// Eval reports whether the event value v satisfies the constraint
// "attribute OP c.Value". A value of another class (number, string, boolean)
// satisfies nothing, not even !=.
func (c Constraint) Eval(v Value) bool {
	if v.Type.class() != c.Value.Type.class() {
		return false
	}
	switch c.Op {
	case OpPrefix:
		return strings.HasPrefix(v.Str, c.Value.Str)
	case OpSuffix:
		return strings.HasSuffix(v.Str, c.Value.Str)
	case OpContains:
		return strings.Contains(v.Str, c.Value.Str)
	}
	r := compareValues(v, c.Value)
	switch c.Op {
	case OpEq:
		return r == 0
	case OpNe:
		return r != 0
	case OpLt:
		return r < 0
	case OpLe:
		return r <= 0
	case OpGt:
		return r > 0
	case OpGe:
		return r >= 0
	}
	return false
}

// Satisfied reports whether the event satisfies the constraint; a missing
// attribute satisfies nothing.
func (c Constraint) Satisfied(e *Event) bool {
	v, ok := e.Get(c.Name)
	return ok && c.Eval(v)
}

// Matches reports whether the event satisfies every constraint of the filter.
func (f Filter) Matches(e *Event) bool {
	for _, c := range f {
		if !c.Satisfied(e) {
			return false
		}
	}
	return len(f) > 0
}

// BruteMatch returns the sorted ports of specs whose predicate the event
// satisfies, by evaluating every constraint of every filter.
func BruteMatch(specs []Spec, e *Event) []uint32 {
	var ports []uint32
	for _, s := range specs {
		for _, f := range s.Filters {
			if f.Matches(e) {
				ports = append(ports, s.Port)
				break
			}
		}
	}
	slices.Sort(ports)
	return slices.Compact(ports)
}

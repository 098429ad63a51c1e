package pubsub

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Attr is one attribute of an event.
type Attr struct {
	Name  string
	Value Value
}

// Event is a set of attributes with distinct names.
type Event struct {
	Attrs []Attr
}

func (e *Event) String() string {
	parts := make([]string, len(e.Attrs))
	for i, a := range e.Attrs {
		parts[i] = a.Name + "=" + a.Value.String()
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// Validate checks an event: names of 1..MaxName bytes (any bytes: an event
// may carry names no subscription can spell), distinct; strings of at most
// MaxString bytes; known types; no NaN; booleans 0 or 1.
func (e *Event) Validate() error {
	for i, a := range e.Attrs {
		if a.Name == "" || len(a.Name) > MaxName {
			return fmt.Errorf("pubsub: attribute %d: name of %d bytes (1 to %d)", i, len(a.Name), MaxName)
		}
		switch a.Value.Type {
		case TypeInt:
		case TypeFloat:
			if math.IsNaN(a.Value.Float) {
				return fmt.Errorf("pubsub: attribute %q: NaN is not a value", a.Name)
			}
		case TypeString:
			if len(a.Value.Str) > MaxString {
				return fmt.Errorf("pubsub: attribute %q: string of %d bytes (at most %d)", a.Name, len(a.Value.Str), MaxString)
			}
		case TypeBool:
			if a.Value.Int != 0 && a.Value.Int != 1 {
				return fmt.Errorf("pubsub: attribute %q: boolean %d", a.Name, a.Value.Int)
			}
		default:
			return fmt.Errorf("pubsub: attribute %q: unknown type %d", a.Name, a.Value.Type)
		}
	}
	return checkDistinct(e.Attrs)
}

func checkDistinct(as []Attr) error {
	if len(as) <= 16 {
		for i := range as {
			for j := i + 1; j < len(as); j++ {
				if as[i].Name == as[j].Name {
					return fmt.Errorf("pubsub: attribute %q appears twice", as[i].Name)
				}
			}
		}
		return nil
	}
	seen := make(map[string]struct{}, len(as))
	for _, a := range as {
		if _, ok := seen[a.Name]; ok {
			return fmt.Errorf("pubsub: attribute %q appears twice", a.Name)
		}
		seen[a.Name] = struct{}{}
	}
	return nil
}

// DecodeJSON decodes one event from a JSON object whose members are its
// attributes: a JSON number without a fraction or an exponent is an integer
// (it must fit 64 bits), any other number a float; strings and booleans are
// themselves. Objects, arrays and null are not attribute values; neither
// are duplicate names.
func DecodeJSON(data []byte) (Event, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	t, err := d.Token()
	if err != nil {
		return Event{}, fmt.Errorf("pubsub: event: %v", err)
	}
	if t != json.Delim('{') {
		return Event{}, fmt.Errorf("pubsub: event: expected a JSON object, got %v", tokenString(t))
	}
	var e Event
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return Event{}, fmt.Errorf("pubsub: event: %v", err)
		}
		name := t.(string) // object keys are strings
		t, err = d.Token()
		if err != nil {
			return Event{}, fmt.Errorf("pubsub: event: attribute %q: %v", name, err)
		}
		var v Value
		switch x := t.(type) {
		case json.Number:
			v, err = jsonNumber(string(x))
			if err != nil {
				return Event{}, fmt.Errorf("pubsub: event: attribute %q: %v", name, err)
			}
		case string:
			v = Str(x)
		case bool:
			v = Bool(x)
		case nil:
			return Event{}, fmt.Errorf("pubsub: event: attribute %q: null is not an attribute value", name)
		case json.Delim:
			return Event{}, fmt.Errorf("pubsub: event: attribute %q: nested %s are not attribute values", name, map[json.Delim]string{'[': "arrays", '{': "objects"}[x])
		}
		e.Attrs = append(e.Attrs, Attr{Name: name, Value: v})
	}
	if _, err := d.Token(); err != nil { // the closing '}'
		return Event{}, fmt.Errorf("pubsub: event: %v", err)
	}
	if _, err := d.Token(); err != io.EOF {
		return Event{}, errors.New("pubsub: event: data after the object")
	}
	if err := e.Validate(); err != nil {
		return Event{}, err
	}
	return e, nil
}

func tokenString(t json.Token) string {
	switch x := t.(type) {
	case json.Delim:
		return string(x)
	case nil:
		return "null"
	case string:
		return strconv.Quote(x)
	}
	return fmt.Sprint(t)
}

func jsonNumber(s string) (Value, error) {
	if !strings.ContainsAny(s, ".eE") {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return Value{}, fmt.Errorf("integer %s out of the 64-bit range", s)
		}
		return Int(n), nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && (!errors.Is(err, strconv.ErrRange) || math.IsInf(f, 0)) {
		return Value{}, fmt.Errorf("float %s out of the 64-bit range", s)
	}
	return Float(f), nil
}

// ReadJSONEvents reads JSON lines, one event per line; blank lines are
// skipped (they are not events). An error names its line.
func ReadJSONEvents(r io.Reader) ([]Event, error) {
	br := bufio.NewReader(r)
	var evs []Event
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			e, derr := DecodeJSON(line)
			if derr != nil {
				return nil, fmt.Errorf("line %d: %w", n, derr)
			}
			evs = append(evs, e)
		}
		if err == io.EOF {
			return evs, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// AppendJSON appends the event as a JSON object (floats always with a '.'
// or an exponent, so that DecodeJSON reads them back as floats).
func (e *Event) AppendJSON(dst []byte) []byte {
	dst = append(dst, '{')
	for i, a := range e.Attrs {
		if i > 0 {
			dst = append(dst, ',')
		}
		k, _ := json.Marshal(a.Name)
		dst = append(dst, k...)
		dst = append(dst, ':')
		switch a.Value.Type {
		case TypeString:
			s, _ := json.Marshal(a.Value.Str)
			dst = append(dst, s...)
		case TypeFloat:
			if math.IsInf(a.Value.Float, 0) { // JSON has no infinity; the nearest float
				dst = append(dst, map[bool]string{true: "1.7976931348623157e308", false: "-1.7976931348623157e308"}[a.Value.Float > 0]...)
				break
			}
			dst = append(dst, a.Value.String()...)
		default:
			dst = append(dst, a.Value.String()...)
		}
	}
	return append(dst, '}')
}

package pubsub

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// The binary event encoding (the payload of an event packet); see the
// package documentation for the specification.
const (
	WireMagic   = "GSEV"
	WireVersion = 1
	wireHeader  = 8
	// MaxWireAttrs is the most attributes an encoded event may carry.
	MaxWireAttrs = 4096
)

// Wire type codes are the Type values.

// ErrWire is wrapped by every decoding error, so that a datapath can count
// malformed events with errors.Is.
var ErrWire = errors.New("pubsub: malformed event packet")

func wireErr(off int, format string, args ...any) error {
	return fmt.Errorf("%w: offset %d: %s", ErrWire, off, fmt.Sprintf(format, args...))
}

// AppendWire appends the binary encoding of the event to dst. The event must
// be valid (Validate) and have at most MaxWireAttrs attributes.
func (e *Event) AppendWire(dst []byte) ([]byte, error) {
	if err := e.Validate(); err != nil {
		return dst, err
	}
	if len(e.Attrs) > MaxWireAttrs {
		return dst, fmt.Errorf("pubsub: %d attributes (at most %d in a packet)", len(e.Attrs), MaxWireAttrs)
	}
	dst = append(dst, WireMagic...)
	dst = append(dst, WireVersion, 0)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(e.Attrs)))
	for _, a := range e.Attrs {
		dst = append(dst, byte(len(a.Name)))
		dst = append(dst, a.Name...)
		dst = append(dst, byte(a.Value.Type))
		switch a.Value.Type {
		case TypeInt:
			dst = binary.BigEndian.AppendUint64(dst, uint64(a.Value.Int))
		case TypeFloat:
			dst = binary.BigEndian.AppendUint64(dst, math.Float64bits(a.Value.Float))
		case TypeString:
			dst = append(dst, byte(len(a.Value.Str)))
			dst = append(dst, a.Value.Str...)
		case TypeBool:
			dst = append(dst, byte(a.Value.Int))
		}
	}
	return dst, nil
}

// DecodeWire decodes one event packet payload. Every length is checked
// against the data before it is used; a malformed payload is an error
// wrapping ErrWire, never a panic.
func DecodeWire(b []byte) (Event, error) {
	if len(b) < wireHeader {
		return Event{}, wireErr(0, "%d bytes, shorter than the %d-byte header", len(b), wireHeader)
	}
	if string(b[:4]) != WireMagic {
		return Event{}, wireErr(0, "bad magic %q", b[:4])
	}
	if b[4] != WireVersion {
		return Event{}, wireErr(4, "version %d (this decoder knows %d)", b[4], WireVersion)
	}
	if b[5] != 0 {
		return Event{}, wireErr(5, "flags %#x (must be 0)", b[5])
	}
	n := int(binary.BigEndian.Uint16(b[6:8]))
	if n > MaxWireAttrs {
		return Event{}, wireErr(6, "%d attributes (at most %d)", n, MaxWireAttrs)
	}
	// Every attribute takes at least 4 bytes (name length, 1-byte name,
	// type, 1-byte value): reject an impossible count before allocating.
	if n*4 > len(b)-wireHeader {
		return Event{}, wireErr(6, "%d attributes cannot fit in %d bytes", n, len(b)-wireHeader)
	}
	e := Event{Attrs: make([]Attr, n)}
	off := wireHeader
	for i := 0; i < n; i++ {
		if off >= len(b) {
			return Event{}, wireErr(off, "attribute %d: truncated", i)
		}
		nl := int(b[off])
		if nl == 0 {
			return Event{}, wireErr(off, "attribute %d: empty name", i)
		}
		off++
		if off+nl+1 > len(b) {
			return Event{}, wireErr(off, "attribute %d: truncated name", i)
		}
		name := string(b[off : off+nl])
		off += nl
		t := Type(b[off])
		off++
		var v Value
		switch t {
		case TypeInt, TypeFloat:
			if off+8 > len(b) {
				return Event{}, wireErr(off, "attribute %q: truncated number", name)
			}
			u := binary.BigEndian.Uint64(b[off:])
			off += 8
			if t == TypeInt {
				v = Int(int64(u))
			} else {
				f := math.Float64frombits(u)
				if math.IsNaN(f) {
					return Event{}, wireErr(off-8, "attribute %q: NaN", name)
				}
				v = Float(f)
			}
		case TypeString:
			if off >= len(b) {
				return Event{}, wireErr(off, "attribute %q: truncated string length", name)
			}
			sl := int(b[off])
			off++
			if off+sl > len(b) {
				return Event{}, wireErr(off, "attribute %q: truncated string", name)
			}
			v = Str(string(b[off : off+sl]))
			off += sl
		case TypeBool:
			if off >= len(b) {
				return Event{}, wireErr(off, "attribute %q: truncated boolean", name)
			}
			if b[off] > 1 {
				return Event{}, wireErr(off, "attribute %q: boolean byte %#x (0 or 1)", name, b[off])
			}
			v = Bool(b[off] == 1)
			off++
		default:
			return Event{}, wireErr(off-1, "attribute %q: unknown type %d", name, t)
		}
		e.Attrs[i] = Attr{Name: name, Value: v}
	}
	if off != len(b) {
		return Event{}, wireErr(off, "%d bytes after the last attribute", len(b)-off)
	}
	if err := checkDistinct(e.Attrs); err != nil {
		return Event{}, fmt.Errorf("%w: %v", ErrWire, err)
	}
	return e, nil
}

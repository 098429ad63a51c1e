package pubsub

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Spec is one subscription line: a port and the filters of its predicate
// (alternatives). Line is the line it came from (1-based; 0 when not parsed
// from text).
type Spec struct {
	Port    uint32
	Filters []Filter
	Line    int
}

func (s Spec) String() string {
	return strconv.FormatUint(uint64(s.Port), 10) + ": " + FormatPredicate(s.Filters)
}

// SyntaxError is an error in subscription text, at a line and a byte column
// (both 1-based).
type SyntaxError struct {
	Line, Col int
	Msg       string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("line %d, column %d: %s", e.Line, e.Col, e.Msg)
}

// Parse reads subscription text: one subscription per line, PORT: PREDICATE.
// Blank lines and comments (from # outside a string to the end of the line)
// are skipped. It returns one Spec per subscription line, in order; several
// lines for one port are alternatives of the port's predicate. The first
// error stops it and is a *SyntaxError.
func Parse(text string) ([]Spec, error) {
	var specs []Spec
	for n := 1; text != ""; n++ {
		line := text
		if i := strings.IndexByte(text, '\n'); i >= 0 {
			line, text = text[:i], text[i+1:]
		} else {
			text = ""
		}
		line = strings.TrimSuffix(line, "\r")
		p := &parser{s: line, line: n}
		spec, ok, err := p.subscription()
		if err != nil {
			return nil, err
		}
		if ok {
			specs = append(specs, spec)
		}
	}
	return specs, nil
}

// ParsePredicate parses one PREDICATE (filters joined by ||) without a port,
// as the subscription API receives it. Errors name column and line 1.
func ParsePredicate(s string) ([]Filter, error) {
	if strings.ContainsAny(s, "\n\r") {
		i := strings.IndexAny(s, "\n\r")
		return nil, &SyntaxError{Line: 1, Col: i + 1, Msg: "a predicate is one line"}
	}
	p := &parser{s: s, line: 1}
	p.ws()
	if p.end() {
		return nil, p.errf("empty predicate")
	}
	return p.predicate()
}

type parser struct {
	s    string
	i    int
	line int
}

func (p *parser) errf(format string, args ...any) error {
	return &SyntaxError{Line: p.line, Col: p.i + 1, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) errAt(i int, format string, args ...any) error {
	return &SyntaxError{Line: p.line, Col: i + 1, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) ws() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

// end reports whether the rest of the line is empty or a comment.
func (p *parser) end() bool { return p.i == len(p.s) || p.s[p.i] == '#' }

func (p *parser) subscription() (Spec, bool, error) {
	p.ws()
	if p.end() {
		return Spec{}, false, nil
	}
	start := p.i
	for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		p.i++
	}
	if p.i == start {
		return Spec{}, false, p.errf("expected a port number")
	}
	port, err := strconv.ParseUint(p.s[start:p.i], 10, 32)
	if err != nil {
		return Spec{}, false, p.errAt(start, "port %s out of range (0 to 4294967295)", p.s[start:p.i])
	}
	p.ws()
	if p.i == len(p.s) || p.s[p.i] != ':' {
		return Spec{}, false, p.errf("expected ':' after the port")
	}
	p.i++
	p.ws()
	if p.end() {
		return Spec{}, false, p.errf("expected a predicate after ':'")
	}
	fs, err := p.predicate()
	if err != nil {
		return Spec{}, false, err
	}
	return Spec{Port: uint32(port), Filters: fs, Line: p.line}, true, nil
}

func (p *parser) peek2(s string) bool { return strings.HasPrefix(p.s[p.i:], s) }

func (p *parser) predicate() ([]Filter, error) {
	var fs []Filter
	for {
		f, err := p.filter()
		if err != nil {
			return nil, err
		}
		fs = append(fs, f)
		p.ws()
		if p.end() {
			return fs, nil
		}
		if !p.peek2("||") {
			return nil, p.errf("expected &&, || or the end of the line")
		}
		p.i += 2
	}
}

func (p *parser) filter() (Filter, error) {
	var f Filter
	start := p.i
	for {
		c, err := p.constraint()
		if err != nil {
			return nil, err
		}
		f = append(f, c)
		p.ws()
		if !p.peek2("&&") {
			break
		}
		p.i += 2
	}
	if len(f) > MaxFilter {
		return nil, p.errAt(start, "a filter has at most %d constraints (this one has %d)", MaxFilter, len(f))
	}
	return f, nil
}

func (p *parser) constraint() (Constraint, error) {
	p.ws()
	start := p.i
	for p.i < len(p.s) && nameChar(p.s[p.i]) {
		p.i++
	}
	if p.i == start {
		return Constraint{}, p.errf("expected an attribute name")
	}
	if p.i-start > MaxName {
		return Constraint{}, p.errAt(start, "name of %d bytes (at most %d)", p.i-start, MaxName)
	}
	c := Constraint{Name: p.s[start:p.i]}
	p.ws()
	opAt := p.i
	op, ok := p.op()
	if !ok {
		return Constraint{}, p.errf("expected an operator (= != < <= > >= ^= $= *=)")
	}
	c.Op = op
	p.ws()
	v, err := p.value()
	if err != nil {
		return Constraint{}, err
	}
	if !op.Applies(v.Type) {
		return Constraint{}, p.errAt(opAt, "operator %s does not apply to a %s value", op, v.Type)
	}
	c.Value = v
	return c, nil
}

func (p *parser) op() (Op, bool) {
	rest := p.s[p.i:]
	for _, o := range []Op{OpNe, OpLe, OpGe, OpPrefix, OpSuffix, OpContains, OpEq, OpLt, OpGt} {
		if strings.HasPrefix(rest, opNames[o]) {
			p.i += len(opNames[o])
			return o, true
		}
	}
	return 0, false
}

func (p *parser) value() (Value, error) {
	if p.i == len(p.s) {
		return Value{}, p.errf("expected a value")
	}
	if p.s[p.i] == '"' {
		return p.str()
	}
	start := p.i
	for p.i < len(p.s) && (nameChar(p.s[p.i]) || p.s[p.i] == '+') {
		p.i++
	}
	tok := p.s[start:p.i]
	switch tok {
	case "":
		return Value{}, p.errf("expected a value (a number, a quoted string, true or false)")
	case "true":
		return Bool(true), nil
	case "false":
		return Bool(false), nil
	}
	isFloat, ok := numberSyntax(tok)
	if !ok {
		return Value{}, p.errAt(start, "invalid value %q (a number, a quoted string, true or false)", tok)
	}
	if !isFloat {
		n, err := strconv.ParseInt(tok, 10, 64)
		if err != nil {
			return Value{}, p.errAt(start, "integer %s out of the 64-bit range", tok)
		}
		return Int(n), nil
	}
	f, err := strconv.ParseFloat(tok, 64)
	if err != nil && (!errors.Is(err, strconv.ErrRange) || math.IsInf(f, 0)) {
		return Value{}, p.errAt(start, "float %s out of the 64-bit range", tok)
	}
	return Float(f), nil
}

// numberSyntax checks tok against [+-]? digits? ('.' digits?)? ([eE] [+-]? digits)?
// with at least one mantissa digit; a '.' or an exponent makes it a float.
func numberSyntax(tok string) (isFloat, ok bool) {
	i := 0
	if i < len(tok) && (tok[i] == '+' || tok[i] == '-') {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(tok) && tok[i] >= '0' && tok[i] <= '9' {
			i++
			n++
		}
		return n
	}
	m := digits()
	if i < len(tok) && tok[i] == '.' {
		i++
		isFloat = true
		m += digits()
	}
	if m == 0 {
		return false, false
	}
	if i < len(tok) && (tok[i] == 'e' || tok[i] == 'E') {
		i++
		isFloat = true
		if i < len(tok) && (tok[i] == '+' || tok[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false, false
		}
	}
	return isFloat, i == len(tok)
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

func (p *parser) str() (Value, error) {
	open := p.i
	p.i++
	var b []byte
	for {
		if p.i >= len(p.s) {
			return Value{}, p.errAt(open, "unterminated string")
		}
		c := p.s[p.i]
		switch c {
		case '"':
			p.i++
			if len(b) > MaxString {
				return Value{}, p.errAt(open, "string of %d bytes (at most %d)", len(b), MaxString)
			}
			return Str(string(b)), nil
		case '\\':
			if p.i+1 >= len(p.s) {
				return Value{}, p.errf("unterminated escape")
			}
			switch e := p.s[p.i+1]; e {
			case '"', '\\':
				b = append(b, e)
				p.i += 2
			case 'n':
				b = append(b, '\n')
				p.i += 2
			case 't':
				b = append(b, '\t')
				p.i += 2
			case 'x':
				if p.i+3 >= len(p.s) {
					return Value{}, p.errf(`\x needs two hex digits`)
				}
				h, ok1 := unhex(p.s[p.i+2])
				l, ok2 := unhex(p.s[p.i+3])
				if !ok1 || !ok2 {
					return Value{}, p.errf(`\x needs two hex digits`)
				}
				b = append(b, h<<4|l)
				p.i += 4
			default:
				return Value{}, p.errf(`unknown escape \%c (\" \\ \n \t \xHH)`, e)
			}
		default:
			b = append(b, c)
			p.i++
		}
	}
}

// Package prom writes metrics in the Prometheus text exposition format:
// the few lines every WriteMetrics of the project needs.
package prom

import (
	"fmt"
	"io"
)

// Writer writes metric lines to w and keeps the first write error; after
// an error it writes nothing more.
type Writer struct {
	w   io.Writer
	err error
}

// New returns a Writer on w.
func New(w io.Writer) *Writer { return &Writer{w: w} }

// Printf writes one or more formatted lines.
func (p *Writer) Printf(format string, a ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, a...)
	}
}

// Head writes a metric's HELP and TYPE lines (typ: counter, gauge,
// histogram).
func (p *Writer) Head(name, typ, help string) {
	p.Printf("# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
}

// Err is the first write error, or nil.
func (p *Writer) Err() error { return p.err }

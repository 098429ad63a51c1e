package prom

import (
	"errors"
	"strings"
	"testing"
)

type failAfter struct{ n int }

func (f *failAfter) Write(b []byte) (int, error) {
	if f.n == 0 {
		return 0, errors.New("closed")
	}
	f.n--
	return len(b), nil
}

func TestWriter(t *testing.T) {
	var b strings.Builder
	p := New(&b)
	p.Head("x_total", "counter", "Things.")
	p.Printf("x_total %d\n", 3)
	if want := "# HELP x_total Things.\n# TYPE x_total counter\nx_total 3\n"; b.String() != want || p.Err() != nil {
		t.Fatalf("got %q, %v; want %q", b.String(), p.Err(), want)
	}
	f := &failAfter{n: 1}
	p = New(f)
	p.Printf("a\n")
	p.Printf("b\n")
	p.Printf("c\n")
	if p.Err() == nil || f.n != 0 {
		t.Fatalf("the first error is kept and nothing is written after it: err %v", p.Err())
	}
}

package prom

import (
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

type collector struct {
	desc  *prometheus.Desc
	value string
}

func (c collector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }
func (c collector) Collect(ch chan<- prometheus.Metric) {
	ch <- Const(c.desc, prometheus.CounterValue, 3, c.value)
}

// TestWriteTextEscapes: label values with quotes, backslashes, newlines,
// tabs, control characters and invalid UTF-8 come out as text the
// library's parser reads back to the same value (invalid bytes as U+FFFD).
func TestWriteTextEscapes(t *testing.T) {
	desc := prometheus.NewDesc("x_total", "Things.", []string{"name"}, nil)
	for _, v := range []string{"plain", `a"b`, `a\b`, "a\nb", "a\tb\x01", "é\xffz", ""} {
		var b strings.Builder
		if err := WriteText(&b, collector{desc, v}); err != nil {
			t.Fatalf("%q: %v", v, err)
		}
		parser := expfmt.NewTextParser(model.LegacyValidation)
		mfs, err := parser.TextToMetricFamilies(strings.NewReader(b.String()))
		if err != nil {
			t.Fatalf("%q: the output does not parse: %v\n%s", v, err, b.String())
		}
		mf := mfs["x_total"]
		if mf == nil || len(mf.Metric) != 1 || mf.GetHelp() != "Things." || mf.GetType().String() != "COUNTER" {
			t.Fatalf("%q: parsed %v", v, mfs)
		}
		want := strings.ToValidUTF8(v, "\uFFFD")
		if got := mf.Metric[0].Label[0].GetValue(); got != want || mf.Metric[0].Counter.GetValue() != 3 {
			t.Fatalf("%q: label value %q, value %v; want %q, 3", v, got, mf.Metric[0].Counter.GetValue(), want)
		}
	}
}

func TestValidLabelsCopies(t *testing.T) {
	in := []string{"ok", "bad\xff", "x"}
	out := validLabels(in)
	if in[1] != "bad\xff" || out[1] != "bad\uFFFD" || out[0] != "ok" || out[2] != "x" {
		t.Fatalf("in %q, out %q", in, out)
	}
	if ok := []string{"a"}; &validLabels(ok)[0] != &ok[0] {
		t.Fatal("valid labels copied")
	}
}

// TestConstWrongLabels: a wrong number of label values is an invalid
// metric (an error at gathering), not a panic.
func TestConstWrongLabels(t *testing.T) {
	desc := prometheus.NewDesc("x", "X.", []string{"a"}, nil)
	if err := Const(desc, prometheus.GaugeValue, 1).Write(new(dto.Metric)); err == nil {
		t.Fatal("a metric with a missing label value wrote")
	}
	h := Histogram(desc, 1, 1, nil, "a", "b")
	if err := h.Write(new(dto.Metric)); err == nil {
		t.Fatal("a histogram with an extra label value wrote")
	}
}

func TestBool(t *testing.T) {
	if Bool(true) != 1 || Bool(false) != 0 {
		t.Fatal("Bool")
	}
}

// TestWriteTextError: a write error and a registration error come back.
func TestWriteTextError(t *testing.T) {
	desc := prometheus.NewDesc("x_total", "Things.", []string{"name"}, nil)
	if err := WriteText(failWriter{}, collector{desc, "a"}); err == nil {
		t.Fatal("write error lost")
	}
	if err := WriteText(&strings.Builder{}, collector{desc, "a"}, collector{desc, "b"}); err == nil {
		t.Fatal("two collectors of one description registered")
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("closed") }

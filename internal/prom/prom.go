// Package prom holds the few helpers the project's Prometheus collectors
// share. The metrics themselves are github.com/prometheus/client_golang's:
// each part of the agent (gpu.Engine, pipeline.Switch, l3.Router) offers a
// prometheus.Collector that reads its live counters — atomics kept by the
// datapath, untouched by the metrics — into const metrics at scrape time,
// so a scrape costs the packets nothing. The library escapes label values
// and writes the exposition format; this package only
//
//   - makes label values valid UTF-8 (Const), which the library requires of
//     them and which an interface or device name need not be,
//   - turns a state into a 0/1 gauge value (Bool), and
//   - writes collectors in the text format (WriteText), for the
//     WriteMetrics functions kept for tests and tools.
package prom

import (
	"io"
	"strings"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// Const is a const metric of desc with value v and the label values
// labels, each made valid UTF-8 (invalid bytes become U+FFFD). A metric the
// library refuses (a wrong number of label values: a bug) comes back as an
// invalid metric, which fails the scrape's gathering with the error rather
// than panicking the daemon.
func Const(desc *prometheus.Desc, typ prometheus.ValueType, v float64, labels ...string) prometheus.Metric {
	labels = validLabels(labels)
	m, err := prometheus.NewConstMetric(desc, typ, v, labels...)
	if err != nil {
		return prometheus.NewInvalidMetric(desc, err)
	}
	return m
}

// Histogram is a const histogram of desc (count observations summing to
// sum; buckets: upper bound to cumulative count, without +Inf), labels as
// in Const.
func Histogram(desc *prometheus.Desc, count uint64, sum float64, buckets map[float64]uint64, labels ...string) prometheus.Metric {
	labels = validLabels(labels)
	m, err := prometheus.NewConstHistogram(desc, count, sum, buckets, labels...)
	if err != nil {
		return prometheus.NewInvalidMetric(desc, err)
	}
	return m
}

// validLabels returns labels with every value valid UTF-8, copying the
// slice (the caller's) only when one is not.
func validLabels(labels []string) []string {
	for i, l := range labels {
		if !utf8.ValidString(l) {
			out := append([]string(nil), labels...)
			for j := i; j < len(out); j++ {
				out[j] = strings.ToValidUTF8(out[j], "\uFFFD")
			}
			return out
		}
	}
	return labels
}

// Bool is 1 for true and 0 for false: the value of a state gauge.
func Bool(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// WriteText gathers the collectors through a pedantic registry (which
// checks them against their descriptions) and writes them to w in the
// Prometheus text format, metric families sorted by name.
func WriteText(w io.Writer, cs ...prometheus.Collector) error {
	reg := prometheus.NewPedanticRegistry()
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		return err
	}
	enc := expfmt.NewEncoder(w, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return err
		}
	}
	return nil
}

package forward

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Per-frame latency through gswitchd: its histogram
// gswitch_frame_latency_seconds (kernel receive timestamp to the end of
// the frame's batch in the pipeline), scraped from its --metrics listener
// in the switch namespace before and after each step; the step's p50 and
// p99 are read off the difference of the two by linear interpolation
// inside a bucket (the buckets are √2 apart: a value is good to about
// ±20%).

const latencyMetric = "gswitch_frame_latency_seconds"

// latHist is a cumulative histogram: upper bounds (seconds, +Inf last)
// and counts of values at most each bound.
type latHist struct {
	bounds []float64
	cum    []uint64
}

// scrapeLatency reads gswitchd's latency histogram from its metrics
// listener (nil when none runs or it does not answer).
func (e *fwdEnv) scrapeLatency() *latHist {
	resp, err := e.getMetrics()
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	h, err := parseLatency(resp.Body)
	if err != nil {
		fmt.Fprintf(e.log, "bench forward: gswitchd's metrics: %v\n", err)
		return nil
	}
	return h
}

// parseLatency finds the latency histogram in a Prometheus text page.
func parseLatency(r io.Reader) (_ *latHist, err error) {
	// expfmt's parser (prometheus/common v0.66.1) panics on some malformed
	// pages (a label block before any metric name, FuzzParseLatency's
	// corpus): such a page is an error here.
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("malformed metrics page (%v)", p)
		}
	}()
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, err
	}
	mf := mfs[latencyMetric]
	if mf == nil || len(mf.Metric) != 1 || mf.Metric[0].Histogram == nil {
		return nil, fmt.Errorf("no histogram %s", latencyMetric)
	}
	hm := mf.Metric[0].Histogram
	h := &latHist{}
	for _, b := range hm.Bucket {
		h.bounds = append(h.bounds, b.GetUpperBound())
		h.cum = append(h.cum, b.GetCumulativeCount())
	}
	if len(h.bounds) == 0 || !math.IsInf(h.bounds[len(h.bounds)-1], 1) {
		h.bounds = append(h.bounds, math.Inf(1))
		h.cum = append(h.cum, hm.GetSampleCount())
	}
	if !slices.IsSorted(h.bounds) {
		return nil, fmt.Errorf("%s: bounds out of order", latencyMetric)
	}
	return h, nil
}

// since is the histogram of the values recorded after h0 (same bounds).
func (h *latHist) since(h0 *latHist) *latHist {
	if h0 == nil || len(h0.cum) != len(h.cum) {
		return nil
	}
	d := &latHist{bounds: h.bounds, cum: make([]uint64, len(h.cum))}
	for i := range h.cum {
		if h.cum[i] >= h0.cum[i] {
			d.cum[i] = h.cum[i] - h0.cum[i]
		}
	}
	return d
}

// quantile returns the q-quantile (0..1) in microseconds, interpolated
// inside its bucket (the last finite bound for the +Inf bucket); 0 when
// the histogram is empty.
func (h *latHist) quantile(q float64) float64 {
	if h == nil || len(h.cum) == 0 || h.cum[len(h.cum)-1] == 0 {
		return 0
	}
	rank := q * float64(h.cum[len(h.cum)-1])
	for i, c := range h.cum {
		if float64(c) < rank {
			continue
		}
		if math.IsInf(h.bounds[i], 1) {
			if i == 0 {
				return 0
			}
			return h.bounds[i-1] * 1e6
		}
		lo, below := 0.0, uint64(0)
		if i > 0 {
			lo, below = h.bounds[i-1], h.cum[i-1]
		}
		in := c - below
		if in == 0 {
			return h.bounds[i] * 1e6
		}
		return (lo + (h.bounds[i]-lo)*(rank-float64(below))/float64(in)) * 1e6
	}
	return h.bounds[len(h.bounds)-1] * 1e6
}

// getMetrics fetches gswitchd's Prometheus page over a connection made in
// the switch's namespace; an error when it has no metrics listener.
func (e *fwdEnv) getMetrics() (*http.Response, error) {
	if e.metricsAddr == "" {
		return nil, errors.New("no metrics listener")
	}
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var conn net.Conn
			err := inNS(e.sw, func() (err error) {
				conn, err = (&net.Dialer{Timeout: time.Second}).DialContext(ctx, network, addr)
				return err
			})
			return conn, err
		},
	}}
	return c.Get("http://" + e.metricsAddr + "/metrics")
}

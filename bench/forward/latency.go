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

	dto "github.com/prometheus/client_model/go"
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

// stageMetric is the same latency by stage (label stage: ring, batch,
// run), which add up to it; a gswitchd before 2026-11-26 has none.
const stageMetric = "gswitch_frame_latency_stage_seconds"

// writeLockMetric is how long each kind of change (label op) held the
// datapath back: from its request for the switch's write lock to its
// release; a gswitchd before 2026-11-26 17:30 has none.
const writeLockMetric = "gswitch_switch_write_lock_seconds"

// runPartMetric is the time of a datapath worker's run by part (label
// part: parse, lookup, decide, send), a value per timed run (one in 8); a gswitchd before
// 2026-11-27 has none.
const runPartMetric = "gswitch_worker_run_part_seconds"

// stallsMetric and stallTimeMetric count the waits of a receive queue's
// reader for its runner (gswitchd's Config.Depth batches unfinished) and
// their time; a gswitchd before 2026-11-27 06:00 has neither.
const (
	stallsMetric    = "gswitch_receive_stalls_total"
	stallTimeMetric = "gswitch_receive_stall_seconds_total"
)

// handoversMetric and handoverIdleMetric count the hand-overs of a
// receive queue's ordered transmit from one batch in flight to the next
// and the transmit's idle time between them, by why (wake, lookup);
// sharedStageMetric is a shared device batch's time by stage (form, start,
// slot, lookup, handback); batchMetric the frames per batch. A gswitchd
// before 2026-11-27 07:00 has no hand-overs, one without a GPU no shared
// batches.
const (
	handoversMetric    = "gswitch_transmit_handovers_total"
	handoverIdleMetric = "gswitch_transmit_handover_idle_seconds_total"
	sharedStageMetric  = "gswitch_shared_batch_stage_seconds"
	batchMetric        = "gswitch_batch_frames"
)

// The workers' shared device batches (--worker-shared, gpu.Gatherer):
// batches submitted, their keys and runs (shares), and the batches closed
// by why (full, idle, wait). A gswitchd without --worker-shared has none.
const (
	gatherBatchesMetric = "gswitch_gatherer_batches_total"
	gatherKeysMetric    = "gswitch_gatherer_keys_total"
	gatherSharesMetric  = "gswitch_gatherer_shares_total"
	gatherClosedMetric  = "gswitch_gatherer_closed_total"
)

// The resident lookups (gswitchd's --resident-lookups, docs/gpu.md): lookups posted
// to a device's resident kernel and its launches, by device. A gswitchd
// without them has none.
const (
	residentLookupsMetric  = "gswitch_backend_resident_lookups_total"
	residentLaunchesMetric = "gswitch_backend_resident_launches_total"
)

// latPage is what a metrics page says of the latency: the whole and, when
// gswitchd exports them, the stages, the write-lock spans by op, the
// workers' run parts and the readers' stalls.
type latPage struct {
	total     *latHist
	stages    map[string]*latHist
	writeLock map[string]*latHist
	runParts  map[string]*latHist
	stalls    float64 // stallsMetric; -1: not exported
	stallSec  float64
	// handovers: handoversMetric (-1: not exported); idle: the seconds of
	// handoverIdleMetric by why.
	handovers float64
	idle      map[string]float64
	shared    map[string]*latHist
	// batches and frames: gswitch_batch_frames' count and sum.
	batches, frames float64
	// The shared batches' counters (gather: -1 when not exported): batches,
	// keys and shares, and the closes by why.
	gather, gatherKeys, gatherShares float64
	gatherClosed                     map[string]float64
	// The resident lookups and launches over every device (resident: -1
	// when not exported).
	resident, residentLaunches float64
}

// since is the page of the values recorded after p0.
func (p *latPage) since(p0 *latPage) *latPage {
	if p0 == nil {
		return nil
	}
	d := newLatPage()
	d.total = p.total.since(p0.total)
	if p.stalls >= 0 && p0.stalls >= 0 {
		d.stalls, d.stallSec = max(p.stalls-p0.stalls, 0), max(p.stallSec-p0.stallSec, 0)
	}
	if p.handovers >= 0 && p0.handovers >= 0 {
		d.handovers = max(p.handovers-p0.handovers, 0)
		for k, v := range p.idle {
			d.idle[k] = max(v-p0.idle[k], 0)
		}
	}
	d.batches, d.frames = max(p.batches-p0.batches, 0), max(p.frames-p0.frames, 0)
	if p.gather >= 0 && p0.gather >= 0 {
		d.gather, d.gatherKeys, d.gatherShares = max(p.gather-p0.gather, 0), max(p.gatherKeys-p0.gatherKeys, 0), max(p.gatherShares-p0.gatherShares, 0)
		for k, v := range p.gatherClosed {
			d.gatherClosed[k] = max(v-p0.gatherClosed[k], 0)
		}
	}
	if p.resident >= 0 && p0.resident >= 0 {
		d.resident, d.residentLaunches = max(p.resident-p0.resident, 0), max(p.residentLaunches-p0.residentLaunches, 0)
	}
	for _, m := range []struct{ now, before, into map[string]*latHist }{
		{p.stages, p0.stages, d.stages}, {p.writeLock, p0.writeLock, d.writeLock}, {p.runParts, p0.runParts, d.runParts},
		{p.shared, p0.shared, d.shared},
	} {
		for k, h := range m.now {
			if hd := h.since(m.before[k]); hd != nil {
				m.into[k] = hd
			}
		}
	}
	return d
}

func newLatPage() *latPage {
	return &latPage{stages: map[string]*latHist{}, writeLock: map[string]*latHist{}, runParts: map[string]*latHist{},
		shared: map[string]*latHist{}, idle: map[string]float64{}, stalls: -1, handovers: -1,
		gather: -1, gatherClosed: map[string]float64{}, resident: -1}
}

// scrapeLatency reads gswitchd's latency histograms from its metrics
// listener (nil when none runs or it does not answer).
func (e *fwdEnv) scrapeLatency() *latPage {
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

// parseLatency finds the latency histograms in a Prometheus text page.
func parseLatency(r io.Reader) (_ *latPage, err error) {
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
	page := newLatPage()
	if n, ok := counterOf(mfs[stallsMetric]); ok {
		page.stalls = n
		page.stallSec, _ = counterOf(mfs[stallTimeMetric])
	}
	if n, ok := counterOf(mfs[handoversMetric]); ok {
		page.handovers = n
		if err = labelledCounters(mfs[handoverIdleMetric], "why", page.idle); err != nil {
			return nil, err
		}
	}
	if n, ok := counterOf(mfs[gatherBatchesMetric]); ok {
		page.gather = n
		page.gatherKeys, _ = counterOf(mfs[gatherKeysMetric])
		page.gatherShares, _ = counterOf(mfs[gatherSharesMetric])
		if err = labelledCounters(mfs[gatherClosedMetric], "why", page.gatherClosed); err != nil {
			return nil, err
		}
	}
	if mf := mfs[residentLookupsMetric]; mf != nil {
		if page.resident, err = summedCounters(mf, "device"); err != nil {
			return nil, err
		}
		if page.residentLaunches, err = summedCounters(mfs[residentLaunchesMetric], "device"); err != nil {
			return nil, err
		}
	}
	if mf := mfs[batchMetric]; mf != nil && len(mf.Metric) == 1 && mf.Metric[0].Histogram != nil {
		h := mf.Metric[0].Histogram
		if n, sum := float64(h.GetSampleCount()), h.GetSampleSum(); sum >= 0 && !math.IsNaN(sum) {
			page.batches, page.frames = n, sum
		}
	}
	if page.total, err = histOf(latencyMetric, mf.Metric[0].Histogram); err != nil {
		return nil, err
	}
	if err = labelled(mfs[stageMetric], "stage", page.stages); err != nil {
		return nil, err
	}
	if err = labelled(mfs[writeLockMetric], "op", page.writeLock); err != nil {
		return nil, err
	}
	if err = labelled(mfs[runPartMetric], "part", page.runParts); err != nil {
		return nil, err
	}
	if err = labelled(mfs[sharedStageMetric], "stage", page.shared); err != nil {
		return nil, err
	}
	return page, nil
}

// counterOf is the value of family mf's one counter (false: no such
// family, or not one counter).
func counterOf(mf *dto.MetricFamily) (float64, bool) {
	if mf == nil || len(mf.Metric) != 1 || mf.Metric[0].Counter == nil {
		return 0, false
	}
	v := mf.Metric[0].Counter.GetValue()
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0, false
	}
	return v, true
}

// labelledCounters puts family mf's counters (nil: none) into into, by
// their label's value.
func labelledCounters(mf *dto.MetricFamily, label string, into map[string]float64) error {
	if mf == nil {
		return nil
	}
	for _, m := range mf.Metric {
		v := labelOf(m, label)
		if v == "" || m.Counter == nil || math.IsNaN(m.Counter.GetValue()) || math.IsInf(m.Counter.GetValue(), 0) || m.Counter.GetValue() < 0 {
			return fmt.Errorf("%s: a series without a %s or not a counter", mf.GetName(), label)
		}
		into[v] = m.Counter.GetValue()
	}
	return nil
}

// summedCounters is the sum of family mf's counters (nil: 0), each
// labelled by label.
func summedCounters(mf *dto.MetricFamily, label string) (float64, error) {
	by := map[string]float64{}
	if err := labelledCounters(mf, label, by); err != nil {
		return 0, err
	}
	sum := 0.0
	for _, v := range by {
		sum += v
	}
	if math.IsInf(sum, 0) {
		return 0, fmt.Errorf("%s: the sum of its series is not finite", mf.GetName())
	}
	return sum, nil
}

// labelOf is metric m's value of label (empty: none).
func labelOf(m *dto.Metric, label string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == label {
			return l.GetValue()
		}
	}
	return ""
}

// labelled puts family mf's histograms (nil: none) into into, by their
// label's value.
func labelled(mf *dto.MetricFamily, label string, into map[string]*latHist) error {
	if mf == nil {
		return nil
	}
	for _, m := range mf.Metric {
		v := labelOf(m, label)
		if v == "" || m.Histogram == nil {
			return fmt.Errorf("%s: a series without a %s or not a histogram", mf.GetName(), label)
		}
		h, err := histOf(mf.GetName(), m.Histogram)
		if err != nil {
			return err
		}
		into[v] = h
	}
	return nil
}

// histOf is the histogram hm of metric name.
func histOf(name string, hm *dto.Histogram) (*latHist, error) {
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
		return nil, fmt.Errorf("%s: bounds out of order", name)
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
	if h.count() == 0 {
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

// count is the number of values in h.
func (h *latHist) count() uint64 {
	if h == nil || len(h.cum) == 0 {
		return 0
	}
	return h.cum[len(h.cum)-1]
}

// max is the upper bound, in microseconds, of the highest bucket that
// holds a value (the last finite bound for the +Inf bucket); 0 when h is
// empty.
func (h *latHist) max() float64 {
	n := h.count()
	if n == 0 {
		return 0
	}
	for i, c := range h.cum {
		if c == n {
			if !math.IsInf(h.bounds[i], 1) {
				return h.bounds[i] * 1e6
			}
			if i > 0 {
				return h.bounds[i-1] * 1e6
			}
			return 0
		}
	}
	return 0
}

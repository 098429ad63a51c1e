package pubsub

import (
	"context"
	"math/rand"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gswitch/gswitch/bench/benchutil"
	"github.com/gswitch/gswitch/datapath/eventfwd"
	"github.com/gswitch/gswitch/gpu"
	ps "github.com/gswitch/gswitch/tables/pubsub"
)

// Churn is matching throughput with subscription changes applied at a
// steady rate, against the same rounds without changes (--churn).
type Churn struct {
	// Path is what the changes and the batches go through: "table" (cpu:
	// Table.Add/Remove, Table.MatchBatch) or "hybrid" (gpu: the table,
	// eventfwd.Hybrid.Sync's bubble update of the device, Hybrid.MatchBatch
	// — gswitchd's path).
	Path string `json:"path"`
	// Op is what a change does (--churn-op): "change" (a subscription
	// added or removed and made visible), "table" (the table's change
	// only, no device update until the round ends), "lock" (the table's
	// write lock taken and released, no change), "cpu" (busy work of 10
	// µs, no change): the last three tell the parts of the loss apart.
	Op   string  `json:"op,omitempty"`
	Rate float64 `json:"rate"` // changes per second asked
	// Clients is the goroutines making the changes (each Rate/Clients per
	// second, each change visible before its next): with several, the
	// changes that wait for one device update go out in the next one
	// together (Hybrid.Sync's group commit).
	Clients int `json:"clients"`
	Batch   int `json:"batch"` // events per batch
	// RoundEvents is the events of each timed round (about --churn-seconds
	// of matching at the quiet rate).
	RoundEvents int `json:"round_events"`
	Rounds      int `json:"rounds"`
	// QuietEventsPerSec and ChurnEventsPerSec are the median rounds
	// without and with changes. The rounds come in pairs, one of each,
	// back to back (quiet, churn; then churn, quiet; ...): LossPct is the
	// median over the pairs of 100 × (1 − churn/quiet), each pair's rounds
	// compared with each other only, so that the host's slow drifts
	// (clocks, other tenants, the heap) that move both rounds of a pair
	// alike cancel, and a pair disturbed by something else is outvoted.
	// PairLossPct lists the pairs' losses (in order), LossP25Pct and
	// LossP75Pct their quartiles (the spread of one run), and
	// LossOfMediansPct the former figure, 100 × (1 − the median churn
	// round / the median quiet round), which mixes rounds from different
	// moments of the run.
	QuietEventsPerSec float64   `json:"quiet_events_per_sec"`
	ChurnEventsPerSec float64   `json:"churn_events_per_sec"`
	LossPct           float64   `json:"loss_pct"`
	LossP25Pct        float64   `json:"loss_p25_pct"`
	LossP75Pct        float64   `json:"loss_p75_pct"`
	LossOfMediansPct  float64   `json:"loss_of_medians_pct"`
	PairLossPct       []float64 `json:"pair_loss_pct"`
	// AchievedRate is the changes per second applied during the churn
	// rounds (behind the asked rate when a change takes longer than its
	// period); ChangeP50US and ChangeP99US time one change until visible
	// (with Sync on the gpu path).
	AchievedRate float64 `json:"achieved_rate"`
	// RateReached says whether AchievedRate is within 2% of Rate.
	RateReached bool    `json:"rate_reached"`
	Changes     int     `json:"changes"`
	ChangeP50US float64 `json:"change_p50_us"`
	ChangeP99US float64 `json:"change_p99_us"`
	// CPUBatches counts the batches the hybrid matched on the CPU (gpu).
	CPUBatches uint64 `json:"cpu_batches,omitempty"`
}

// churner applies subscription changes: an Add of a filter like the
// scenario's, then the Remove of the oldest it added, alternately, each
// made visible (sync).
type churner struct {
	tab   *ps.Table
	specs []ps.Spec
	sync  func() error
	rng   *rand.Rand
	ids   []ps.ID
	n     int
	lat   []float64
	op    string // --churn-op
}

func (c *churner) change() error {
	t0 := time.Now()
	if c.op == "cpu" {
		for time.Since(t0) < 10*time.Microsecond {
		}
		c.n++
		c.lat = append(c.lat, float64(time.Since(t0).Nanoseconds())/1e3)
		return nil
	}
	if c.op == "lock" {
		c.tab.Barrier()
		c.n++
		c.lat = append(c.lat, float64(time.Since(t0).Nanoseconds())/1e3)
		return nil
	}
	if c.n%2 == 0 || len(c.ids) == 0 {
		s := c.specs[c.rng.Intn(len(c.specs))]
		id, err := c.tab.Add(s.Port, s.Filters[:1])
		if err != nil {
			return err
		}
		c.ids = append(c.ids, id)
	} else {
		id := c.ids[0]
		c.ids = c.ids[1:]
		if err := c.tab.Remove(id); err != nil {
			return err
		}
	}
	if c.sync != nil && c.op != "table" {
		if err := c.sync(); err != nil {
			return err
		}
	}
	c.n++
	c.lat = append(c.lat, float64(time.Since(t0).Nanoseconds())/1e3)
	return nil
}

// run applies changes at rate per second until stop is closed; it returns
// how many it applied and the first error.
func (c *churner) run(rate float64, stop <-chan struct{}) (int, error) {
	period := time.Duration(float64(time.Second) / rate)
	start := time.Now()
	for i := 0; ; i++ {
		select {
		case <-stop:
			return i, nil
		default:
		}
		if d := time.Until(start.Add(time.Duration(i) * period)); d > 0 {
			time.Sleep(d)
		}
		if err := c.change(); err != nil {
			return i, err
		}
	}
}

// cleanup removes what the churner added.
func (c *churner) cleanup() error {
	for _, id := range c.ids {
		if err := c.tab.Remove(id); err != nil {
			return err
		}
	}
	c.ids = nil
	if c.sync != nil {
		return c.sync()
	}
	return nil
}

// runChurn measures matching throughput in batches of f.churnBatch on one
// goroutine, rounds with changes at f.churn per second interleaved with
// rounds without. gpu: through an eventfwd.Hybrid on a device of its own
// (gswitchd's path: batches of any size on the device, changes made visible
// by Hybrid.Sync).
func runChurn(f *flags, tab *ps.Table, specs []ps.Spec, evs []ps.Event) (*Churn, error) {
	r := &Churn{Path: "table", Op: f.churnOp, Rate: f.churn, Clients: f.churnClients, Batch: f.churnBatch, Rounds: f.rounds}
	match := func(evs []ps.Event, out [][]uint32) [][]uint32 { return tab.MatchBatch(evs, out) }
	chs := make([]*churner, r.Clients)
	for i := range chs {
		chs[i] = &churner{tab: tab, specs: specs, rng: rand.New(rand.NewSource(f.seed + 2 + int64(i))), op: f.churnOp}
	}
	var h *eventfwd.Hybrid
	if f.backend == "gpu" {
		var err error
		h, err = eventfwd.NewHybrid(eventfwd.HybridConfig{Table: tab, MinBatch: 1,
			Open: func(l *ps.Layout) (eventfwd.Device, error) { return gpu.OpenEventDevice(l) }})
		if err != nil {
			return nil, err
		}
		defer h.Close()
		r.Path = "hybrid"
		match = h.MatchBatch
		for _, ch := range chs {
			ch.sync = func() error { return h.Sync(context.Background()) }
		}
	}
	// round matches n events (evs reused cyclically) and returns events/s.
	round := func(n int) float64 {
		var out [][]uint32
		t0 := time.Now()
		for done := 0; done < n; {
			lo := done % len(evs)
			hi := min(lo+r.Batch, len(evs), lo+n-done)
			out = match(evs[lo:hi], out)
			done += hi - lo
		}
		return float64(n) / time.Since(t0).Seconds()
	}
	warm := round(min(len(evs), 4*r.Batch))
	r.RoundEvents = max(r.Batch, int(warm*f.churnSeconds))
	var quiet, busy, pairLoss []float64
	var changes int64
	var changeTime time.Duration
	var cpu0 uint64
	if h != nil {
		cpu0 = h.Counters().CPUBatches
	}
	for i := 0; i < r.Rounds; i++ {
		for _, withChanges := range [][2]bool{{false, true}, {true, false}}[i%2] {
			if !withChanges {
				quiet = append(quiet, round(r.RoundEvents))
				continue
			}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			errs := make([]error, len(chs))
			t0 := time.Now()
			for i, ch := range chs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var n int
					n, errs[i] = ch.run(r.Rate/float64(len(chs)), stop)
					atomic.AddInt64(&changes, int64(n))
				}()
			}
			busy = append(busy, round(r.RoundEvents))
			close(stop)
			wg.Wait()
			changeTime += time.Since(t0)
			for _, err := range errs {
				if err != nil {
					return nil, err
				}
			}
			if f.churnOp == "table" && chs[0].sync != nil {
				// The device catches up between rounds (a bubble
				// update, not the whole image).
				if err := chs[0].sync(); err != nil {
					return nil, err
				}
			}
		}
		if q := quiet[len(quiet)-1]; q > 0 {
			pairLoss = append(pairLoss, 100*(1-busy[len(busy)-1]/q))
		}
	}
	var lat []float64
	for _, ch := range chs {
		if err := ch.cleanup(); err != nil {
			return nil, err
		}
		lat = append(lat, ch.lat...)
	}
	if h != nil {
		r.CPUBatches = h.Counters().CPUBatches - cpu0
	}
	r.QuietEventsPerSec, r.ChurnEventsPerSec = benchutil.Median(quiet), benchutil.Median(busy)
	if r.QuietEventsPerSec > 0 {
		r.LossOfMediansPct = 100 * (1 - r.ChurnEventsPerSec/r.QuietEventsPerSec)
	}
	r.PairLossPct = pairLoss
	if len(pairLoss) > 0 {
		r.LossPct = benchutil.Median(pairLoss)
		r.LossP25Pct, r.LossP75Pct = benchutil.Percentile(pairLoss, 25), benchutil.Percentile(pairLoss, 75)
	}
	r.Changes = int(changes)
	if changeTime > 0 {
		r.AchievedRate = float64(changes) / changeTime.Seconds()
	}
	r.RateReached = r.AchievedRate >= 0.98*r.Rate
	if len(lat) > 0 {
		r.ChangeP50US, r.ChangeP99US = benchutil.Percentile(lat, 50), benchutil.Percentile(lat, 99)
	}
	return r, nil
}

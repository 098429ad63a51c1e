package forward

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/gswitch/gswitch/bench/benchutil"
)

// series runs the warm-up and one step per rate.
func (e *fwdEnv) series(target, backend string, rules int) ([]Step, error) {
	// Warm-up (not counted): lets the bridge and OVS learn and cache the
	// flows, and gswitchd settle after its start and the rule installation
	// (with a 0.5 s warm-up the first step lost 2-3% in gswitchd's
	// receive ring, at rates the later steps passed without loss).
	fsets := e.frames
	if rules == 0 { // plain, the bridge: no rules, every frame forwarded
		fsets = make([]*frameSet, len(e.frames))
		for k, fs := range e.frames {
			fsets[k] = fs.forwardAll()
		}
	}
	for k, pr := range e.pairs {
		pr.sink.fs.Store(fsets[k])
	}
	e.step++
	if _, _, err := e.generateAll(fsets, 20000, 1500*time.Millisecond); err != nil {
		return nil, err
	}
	time.Sleep(e.f.settle)
	for k, pr := range e.pairs {
		if n, err := pr.sink.frames(); err != nil {
			return nil, err
		} else if n == 0 {
			return nil, fmt.Errorf("%s with %d rules forwarded none of the warm-up frames of pair %d: is the switch forwarding p%d to p%d?", target, rules, k, 2*k+1, 2*k+2)
		}
	}
	var steps []Step
	for _, rate := range e.f.rates {
		if err := e.ctx.Err(); err != nil {
			return steps, err
		}
		s, err := e.stepOnce(target, backend, rules, rate, fsets)
		if err != nil {
			return steps, err
		}
		steps = append(steps, s)
	}
	ml, lt := maxLossless(steps), losslessTo(steps)
	for i := range steps {
		steps[i].MaxLosslessPPS, steps[i].LosslessToPPS = ml, lt
	}
	// The latency step: gswitchd (or the plain forwarder, the floor) at
	// half its lossless rate, where the latency is not the queueing of an
	// overloaded switch.
	if e.f.latencyStep && (isGswitchd(target) || isPlain(target)) && ml > 0 && e.metricsAddr != "" {
		s, err := e.stepOnce(target, backend, rules, int64(ml/2), fsets)
		if err != nil {
			return steps, err
		}
		s.HalfLossless, s.MaxLosslessPPS = true, ml
		steps = append(steps, s)
	}
	return steps, nil
}

// stepOnce sends the frames of fsets at 'rate' for --duration and counts
// what arrived.
func (e *fwdEnv) stepOnce(target, backend string, rules int, rate int64, fsets []*frameSet) (Step, error) {
	e.step++
	before := e.sinkRingDrops()
	backlog0 := backlogDrops()
	sw0 := e.switchCounters()
	lat0 := e.scrapeLatency()
	cpu0 := readCPU(e.swPid, e.swSet)
	perPair, dur, err := e.generateAll(fsets, rate, e.f.duration)
	if err != nil {
		return Step{}, err
	}
	e.waitQuiet()
	var got, sent, want, misrouted, altered uint64
	for k, pr := range e.pairs {
		n, err2 := pr.sink.frames()
		if err2 != nil {
			return Step{}, err2
		}
		got += n
		sent += perPair[k]
		want += fsets[k].expected(perPair[k])
		misrouted += pr.sink.misrouted.Load()
		altered += pr.sink.altered.Load()
		if n > fsets[k].expected(perPair[k]) && err == nil {
			err = fmt.Errorf("%s: pair %d's sink counted %d frames; of the %d sent, the rules forward %d: frames the rules drop, or frames other than the test traffic, reached it (--sink counter counts every frame; --sink ring checks each)", target, k, n, perPair[k], fsets[k].expected(perPair[k]))
		}
	}
	if misrouted > 0 && e.f.check {
		err = fmt.Errorf("%s: --check: %d frames arrived although their rule drops them", target, misrouted)
	}
	if altered > 0 && e.f.check && err == nil {
		err = fmt.Errorf("%s: --check: %d frames arrived other than they were sent (a VLAN tag lost, a field rewritten)", target, altered)
	}
	if err != nil {
		return Step{}, err
	}
	s := Step{
		Bench: "forward", Target: target, Backend: backend, Rules: rules, Ruleset: e.f.ruleset, Round: e.round, AskedPPS: rate,
		Pairs: len(e.pairs), RxQueues: e.f.rxQueues, Sink: e.f.sink,
		OfferedPPS: float64(sent) / dur.Seconds(), ForwardedPPS: float64(got) / dur.Seconds(),
		Sent: sent, Received: got, Expected: want, DroppedByRule: sent - want, Misrouted: misrouted, Altered: altered,
		LossPct: lossPct(want, got), FrameBytes: meanWireBytes(fsets),
		DurationS: dur.Seconds(), SinkRingDrops: e.sinkRingDrops() - before,
		BacklogDrops: backlogDrops() - backlog0,
		SwitchCPUs:   e.f.switchCPUs, BenchCPUs: e.f.benchCPUs, SinkRPS: e.f.sinkRPS,
		Machine: benchutil.Machine(), Time: time.Now().UTC().Format(time.RFC3339),
	}
	if isPlain(target) {
		s.RxRing, s.PlainFlags = e.swRing, e.f.plainFlags
	}
	if isGswitchd(target) {
		s.RxRing, s.RxWorkers, s.WorkerFlight, s.WorkerShared = e.swRing, e.swWorkers, e.swFlight, e.swShared
		if e.swEager {
			s.WorkerClose = "eager"
		}
		s.MaxDelay, s.SharedDelay, s.SwitchFlags = e.f.maxDelay, e.f.sharedDelay, e.f.swFlags
	}
	if sw1 := e.switchCounters(); sw0 != nil && sw1 != nil {
		s.SwitchRx, s.SwitchRxDropped, s.SwitchTx = sw1[0]-sw0[0], sw1[1]-sw0[1], sw1[2]-sw0[2]
		s.SwitchKeysOnCPU, s.SwitchKeysOnGPU = sw1[3]-sw0[3], sw1[4]-sw0[4]
	}
	stages, held, parts := "", "", ""
	if lat1 := e.scrapeLatency(); lat1 != nil {
		if d := lat1.since(lat0); d != nil {
			s.LatencyP50us, s.LatencyP99us = d.total.quantile(0.5), d.total.quantile(0.99)
			s.LatencyStages, stages = p50p99(d.stages, "ring", "batch", "run")
			for _, op := range slices.Sorted(maps.Keys(d.writeLock)) {
				h := d.writeLock[op]
				if n := h.count(); n > 0 {
					if s.WriteLock == nil {
						s.WriteLock = map[string][3]float64{}
					}
					w := [3]float64{float64(n), h.quantile(0.99), h.max()}
					s.WriteLock[op] = w
					held += fmt.Sprintf(" %s %.0f, p99 %.0fµs, max ≤%.0fµs;", op, w[0], w[1], w[2])
				}
			}
			if d.stalls >= 0 {
				s.ReaderStalls, s.ReaderStallMs = uint64(d.stalls), d.stallSec*1e3
			}
			if d.handovers > 0 {
				s.Handovers, s.HandoverWakeMs, s.HandoverLookupMs = uint64(d.handovers), d.idle["wake"]*1e3, d.idle["lookup"]*1e3
			}
			if d.batches > 0 {
				s.BatchFramesAvg = d.frames / d.batches
			}
			if d.gather > 0 {
				s.GatherBatches = uint64(d.gather)
				s.GatherKeysMean, s.GatherSharesMean = d.gatherKeys/d.gather, d.gatherShares/d.gather
				s.GatherClosed = map[string]uint64{}
				for why, n := range d.gatherClosed {
					s.GatherClosed[why] = uint64(n)
				}
			}
			if d.resident > 0 {
				s.ResidentLookups, s.ResidentLaunches = uint64(d.resident), uint64(d.residentLaunches)
			}
			s.SharedStages, _ = p50p99(d.shared, "form", "start", "slot", "lookup", "handback")
			s.RunParts, parts = p50p99(d.runParts, "parse", "lookup", "decide", "send")
		}
	}
	if stages != "" {
		stages = "; p50/p99 by stage:" + stages
	}
	if s.ReaderStalls > 0 {
		stages += fmt.Sprintf("; readers waited for their runners %d times, %.1f ms", s.ReaderStalls, s.ReaderStallMs)
	}
	if s.Handovers > 0 {
		stages += fmt.Sprintf("; transmit hand-overs %d, idle %.1f ms for wake-ups, %.1f ms for lookups", s.Handovers, s.HandoverWakeMs, s.HandoverLookupMs)
	}
	if s.BatchFramesAvg > 0 {
		stages += fmt.Sprintf("; %.1f frames a batch", s.BatchFramesAvg)
	}
	if s.GatherBatches > 0 {
		stages += fmt.Sprintf("; shared batches %d, %.1f keys and %.2f runs each, closed full %d idle %d wait %d",
			s.GatherBatches, s.GatherKeysMean, s.GatherSharesMean, s.GatherClosed["full"], s.GatherClosed["idle"], s.GatherClosed["wait"])
	}
	if s.ResidentLookups > 0 {
		stages += fmt.Sprintf("; resident lookups %d, launches %d", s.ResidentLookups, s.ResidentLaunches)
	}
	if held != "" {
		stages += "; datapath held back by" + strings.TrimSuffix(held, ";")
	}
	if parts != "" {
		stages += "; a worker's run, p50/p99 by part:" + parts
	}
	cpu1 := readCPU(e.swPid, e.swSet)
	s.BusyCores, s.StealCores, s.SwitchCores = cpu1.since(cpu0)
	s.SwitchCPUPerFrameUs = cpuPerFrameUs(s.SwitchCores, cpu1.at.Sub(cpu0.at), s.Received)
	s.SwitchSysPerFrameUs = cpuPerFrameUs(cpu1.sysSince(cpu0), cpu1.at.Sub(cpu0.at), s.Received)
	s.SwitchCPUsBusy, s.SwitchCPUsSoftirq = cpu1.setSince(cpu0)
	if e.swSet != nil {
		stages += fmt.Sprintf("; switch cores busy %.2f, irq and softirq %.2f", s.SwitchCPUsBusy, s.SwitchCPUsSoftirq)
	}
	fmt.Fprintf(e.log, "bench forward: round %d %s rules=%d asked=%d offered=%.0f forwarded=%.0f loss=%.3f%% (dropped by rule %d; backlog drops %d, sink ring drops %d, switch rx %d rx-dropped %d tx %d, keys cpu %d gpu %d; latency p50 %.0fµs p99 %.0fµs%s; busy cores %.1f, stolen %.1f, switch %.1f, %.2fµs a forwarded frame, %.2fµs of it system)\n",
		e.round, target, rules, rate, s.OfferedPPS, s.ForwardedPPS, s.LossPct, s.DroppedByRule, s.BacklogDrops, s.SinkRingDrops, s.SwitchRx, s.SwitchRxDropped, s.SwitchTx,
		s.SwitchKeysOnCPU, s.SwitchKeysOnGPU, s.LatencyP50us, s.LatencyP99us, stages, s.BusyCores, s.StealCores, s.SwitchCores, s.SwitchCPUPerFrameUs, s.SwitchSysPerFrameUs)
	return s, nil
}

// waitQuiet waits --settle after a step's last frame, then until the
// sinks' count holds still for 100 ms (at most 5 s more), so that the
// frames an overloaded switch still held in its queues are counted in
// their own step, never in the next one's (where a counter sink would see
// more frames than were sent to it).
func (e *fwdEnv) waitQuiet() {
	time.Sleep(e.f.settle)
	total := func() uint64 {
		var n uint64
		for _, pr := range e.pairs {
			c, _ := pr.sink.frames()
			n += c
		}
		return n
	}
	last := total()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		n := total()
		if n == last {
			return
		}
		last = n
	}
}

// p50p99 returns the p50 and p99 (µs) of the histograms of hists named
// names that hold samples, and the same as text, " name p50/p99µs" each, in
// names' order (nil and "" when none has).
func p50p99(hists map[string]*latHist, names ...string) (map[string][2]float64, string) {
	var qs map[string][2]float64
	text := ""
	for _, name := range names {
		h := hists[name]
		if h.count() == 0 {
			continue
		}
		if qs == nil {
			qs = map[string][2]float64{}
		}
		q := [2]float64{h.quantile(0.5), h.quantile(0.99)}
		qs[name] = q
		text += fmt.Sprintf(" %s %.0f/%.0fµs", name, q[0], q[1])
	}
	return qs, text
}

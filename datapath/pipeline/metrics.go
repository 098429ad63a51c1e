package pipeline

import (
	"io"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gswitch/gswitch/internal/prom"
)

// switchMetric is one metric of the switch: its description and the const
// type of its samples.
type switchMetric struct {
	desc *prometheus.Desc
	typ  prometheus.ValueType
}

func metricCounter(name, help string, labels ...string) switchMetric {
	return switchMetric{prometheus.NewDesc(name, help, labels, nil), prometheus.CounterValue}
}

func metricGauge(name, help string, labels ...string) switchMetric {
	return switchMetric{prometheus.NewDesc(name, help, labels, nil), prometheus.GaugeValue}
}

// The switch's metrics: names, help and labels as the text writer of
// before the client_golang collectors had them.
var (
	mPortRxPackets = metricCounter("gswitch_port_rx_packets_total", "Frames received.", "port", "name")
	mPortRxBytes   = metricCounter("gswitch_port_rx_bytes_total", "Bytes received.", "port", "name")
	mPortTxPackets = metricCounter("gswitch_port_tx_packets_total", "Frames sent.", "port", "name")
	mPortTxBytes   = metricCounter("gswitch_port_tx_bytes_total", "Bytes sent.", "port", "name")
	mPortRxDropped = metricCounter("gswitch_port_rx_dropped_total", "Received frames dropped (malformed, table miss, no route).", "port", "name")
	mPortTxDropped = metricCounter("gswitch_port_tx_dropped_total", "Frames the device refused.", "port", "name")

	mTableFlows          = metricGauge("gswitch_table_flows", "Flow entries in the table.", "table")
	mTableLookups        = metricCounter("gswitch_table_lookups_total", "Packets looked up in the table.", "table")
	mTableMatched        = metricCounter("gswitch_table_matched_total", "Packets that matched an entry of the table.", "table")
	mTableLPM            = metricGauge("gswitch_table_lpm", "1 while the table is LPM-shaped and served by longest-prefix match, 0 while the classifier serves it.", "table")
	mTableLPMTransitions = metricCounter("gswitch_table_lpm_transitions_total", "Changes of the table between LPM and classifier serving.", "table")
	mTableLPMConflicts   = metricGauge("gswitch_table_lpm_conflicts", "Prefixes of the table whose priorities break longest-prefix order.", "table")

	mMalformedFrames    = metricCounter("gswitch_malformed_frames_total", "Frames dropped because their headers could not be parsed, by reason.", "reason")
	mTableMissDrops     = metricCounter("gswitch_table_miss_drops_total", "Packets dropped on a table miss without a table-miss entry.")
	mNoRoute            = metricCounter("gswitch_no_route_total", "Outputs to a missing port, the input port, or LOCAL.")
	mUnsupportedActions = metricCounter("gswitch_unsupported_actions_total", "Actions the datapath did not execute (groups, MPLS, PBB, fields it cannot set).")
	mGroupDrops         = metricCounter("gswitch_group_drops_total", "Packets of a group with no live bucket.")
	mMeterDrops         = metricCounter("gswitch_meter_drops_total", "Packets a meter's drop band dropped.")
	mOffloadDrops       = metricCounter("gswitch_offload_drops_total", "Received frames whose checksum or segmentation offload could not be finished, or that a frame ring truncated.")

	mBatchFrames   = prometheus.NewDesc("gswitch_batch_frames", "Frames per batch run through the pipeline.", nil, nil)
	mFrameLatency  = prometheus.NewDesc("gswitch_frame_latency_seconds", "Per-frame latency from the kernel's receive timestamp (the receive ring) to the end of its batch's run through the pipeline (transmitted or dropped).", nil, nil)
	mFrameStage    = prometheus.NewDesc("gswitch_frame_latency_stage_seconds", "gswitch_frame_latency_seconds by stage, which add up to it: ring (receive timestamp to the reader taking the frame), batch (to the close of its batch), run (the batch's run: lookups, actions, transmit).", []string{"stage"}, nil)
	mSharedStage   = prometheus.NewDesc("gswitch_shared_batch_stage_seconds", "With a coalescer (a GPU): time per shared batch in each stage, stage=form (first key to close), start (close to the backend call), slot (the CUDA backend's wait for a staging slot), lookup (the backend call: copies, kernel, device completion), handback (results in to a member's wake-up).", []string{"stage"}, nil)
	mRunPart       = prometheus.NewDesc("gswitch_worker_run_part_seconds", "With datapath workers (--rx-workers): time per run of a worker's batches (one run in 8 timed) in each part, part=parse (the frames' keys), lookup (the classifier's lookups, a device's included), decide (the rest of the tables' work and the actions), send (the transmit).", []string{"part"}, nil)
	mWriteLock     = prometheus.NewDesc("gswitch_switch_write_lock_seconds", "Time each change held the datapath back, by op (flow_mod, expire, group_mod, meter_mod, barrier, transaction, other): from its request for the switch's write lock, after which no batch starts, to its release.", []string{"op"}, nil)
	mBatchesClosed = metricCounter("gswitch_batches_closed_total", "Batches a port loop closed, by why: full (batch size reached) or delay (the oldest frame waited the maximum delay).", "why")
	mReaderStalls  = metricCounter("gswitch_receive_stalls_total", "Times a receive queue's reader waited to hand a closed batch over or for an empty one: with a GPU, its --batch-depth closed batches unfinished (a split port: its process goroutine behind). Its ring fills meanwhile.")
	mReaderStallT  = metricCounter("gswitch_receive_stall_seconds_total", "Time receive queues' readers spent in the waits of gswitch_receive_stalls_total.")
	mHandovers     = metricCounter("gswitch_transmit_handovers_total", "With batches in flight (--in-flight above 1): a receive queue's transmits that followed the transmit of the batch before it (its frames leave in order).")
	mHandoverT     = metricCounter("gswitch_transmit_handover_idle_seconds_total", "The time a receive queue's transmit stood idle between two batches in flight, by why: wake (the next batch was ready and its goroutine was being woken) or lookup (the next batch had not come to its transmit: its lookups and actions, or under light traffic its batch not yet closed).", "why")
	mWorkerAhead   = metricCounter("gswitch_worker_lookahead_runs_total", "With a datapath worker's runs in flight (--worker-in-flight): runs by what became of their first table's lookup made ahead, outcome=used (its results decided the run) or relooked (the table was looked up again when the run decided: a change of the tables came while the lookup was in flight, or the lookup could not be made or failed).", "outcome")
	mBatchesPath   = metricCounter("gswitch_batches_path_total", "Receive batches by the path they ran: with a coalescer (a GPU), direct (in the port loop, lookups straight to the classifier: no table was served by the device) or shared (handed to the queue's runner, lookups in shared device batches); worker (run by a datapath worker, --rx-workers, with its other queues' batches; from its first batch on).", "path")

	mLearnedMACs = metricGauge("gswitch_learned_macs", "MAC addresses in the learning table.")
	mStandalone  = metricGauge("gswitch_standalone", "1 while the switch acts as a learning switch (standalone fail mode, no controller).")

	switchMetrics = []switchMetric{
		mPortRxPackets, mPortRxBytes, mPortTxPackets, mPortTxBytes, mPortRxDropped, mPortTxDropped,
		mTableFlows, mTableLookups, mTableMatched, mTableLPM, mTableLPMTransitions, mTableLPMConflicts,
		mMalformedFrames, mTableMissDrops, mNoRoute, mUnsupportedActions, mGroupDrops, mMeterDrops, mOffloadDrops,
		mBatchesClosed, mBatchesPath, mReaderStalls, mReaderStallT, mHandovers, mHandoverT, mWorkerAhead, mLearnedMACs, mStandalone,
	}
)

// switchCollector is a Switch as a prometheus.Collector.
type switchCollector struct{ s *Switch }

// Collector returns a prometheus.Collector of the switch's counters, read
// at each scrape from the atomics the datapath keeps (a scrape adds
// nothing to the packets' path): per port
// gswitch_port_{rx,tx}_{packets,bytes}_total{port,name} and
// gswitch_port_{rx,tx}_dropped_total; per table gswitch_table_flows,
// gswitch_table_lookups_total, gswitch_table_matched_total,
// gswitch_table_lpm (1 while LPM-shaped and served by LPM),
// gswitch_table_lpm_transitions_total and gswitch_table_lpm_conflicts;
// gswitch_malformed_frames_total{reason}, gswitch_table_miss_drops_total,
// gswitch_no_route_total, gswitch_unsupported_actions_total,
// gswitch_{group,meter,offload}_drops_total, the histogram
// gswitch_batch_frames, the histogram gswitch_frame_latency_seconds (per
// frame, receive ring to the end of the pipeline: latency.go) and the same
// by stage, gswitch_frame_latency_stage_seconds{stage} (ring, batch, run:
// LatencyStage),
// gswitch_batches_closed_total{why}, the histogram
// gswitch_switch_write_lock_seconds{op} (how long each kind of change
// held the datapath back: writelock.go), with a coalescer
// gswitch_shared_batch_stage_seconds{stage} (gpu.Stage),
// gswitch_learned_macs and gswitch_standalone.
func (s *Switch) Collector() prometheus.Collector { return switchCollector{s} }

func (c switchCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range switchMetrics {
		ch <- m.desc
	}
	ch <- mBatchFrames
	ch <- mFrameLatency
	ch <- mFrameStage
	ch <- mSharedStage
	ch <- mWriteLock
	ch <- mRunPart
}

func (c switchCollector) Collect(ch chan<- prometheus.Metric) {
	emit := func(m switchMetric, v float64, labels ...string) { ch <- prom.Const(m.desc, m.typ, v, labels...) }
	for _, p := range c.s.PortInfos() {
		no, name, st := strconv.FormatUint(uint64(p.Desc.No), 10), p.Desc.Name, &p.Stats
		emit(mPortRxPackets, float64(st.RxPackets), no, name)
		emit(mPortRxBytes, float64(st.RxBytes), no, name)
		emit(mPortTxPackets, float64(st.TxPackets), no, name)
		emit(mPortTxBytes, float64(st.TxBytes), no, name)
		emit(mPortRxDropped, float64(st.RxDropped), no, name)
		emit(mPortTxDropped, float64(st.TxDropped), no, name)
	}
	for _, t := range c.s.TableInfos() {
		id := strconv.FormatUint(uint64(t.ID), 10)
		emit(mTableFlows, float64(t.Active), id)
		emit(mTableLookups, float64(t.Lookups), id)
		emit(mTableMatched, float64(t.Matched), id)
		emit(mTableLPM, prom.Bool(t.Search == "lpm"), id)
		emit(mTableLPMTransitions, float64(t.LPM.Transitions), id)
		emit(mTableLPMConflicts, float64(t.LPM.Conflicts), id)
	}
	k := c.s.Counters()
	for r, n := range k.Malformed {
		emit(mMalformedFrames, float64(n), r)
	}
	emit(mTableMissDrops, float64(k.MissDrops))
	emit(mNoRoute, float64(k.NoRoute))
	emit(mUnsupportedActions, float64(k.Unsupported))
	emit(mGroupDrops, float64(k.GroupDrops))
	emit(mMeterDrops, float64(k.MeterDrops))
	emit(mOffloadDrops, float64(k.OffloadDrops))
	emit(mLearnedMACs, float64(k.Learned))
	emit(mStandalone, prom.Bool(k.Standalone))

	bs := c.s.BatchStats()
	buckets, cum := cumulative(bs.Counts, bs.Bounds, func(b int) float64 { return float64(b) })
	ch <- prom.Histogram(mBatchFrames, cum, float64(bs.Frames), buckets)
	ch <- latencyHistogram(mFrameLatency, c.s.LatencyStats())
	for st := range numStages {
		ch <- latencyHistogram(mFrameStage, c.s.LatencyStageStats(st), st.String())
	}
	for op := range numWriteOps {
		ch <- latencyHistogram(mWriteLock, c.s.WriteLockStats(op), op.String())
	}
	for rp := range numRunParts {
		ch <- latencyHistogram(mRunPart, c.s.RunPartStats(rp), rp.String())
	}
	emit(mBatchesClosed, float64(bs.Full), "full")
	emit(mBatchesClosed, float64(bs.Delay), "delay")
	emit(mReaderStalls, float64(bs.Stalls))
	emit(mReaderStallT, bs.StallTime.Seconds())
	emit(mHandovers, float64(bs.Handovers))
	emit(mHandoverT, bs.HandoverWake.Seconds(), "wake")
	emit(mHandoverT, bs.HandoverLookup.Seconds(), "lookup")
	if bs.Worker > 0 {
		emit(mBatchesPath, float64(bs.Worker), "worker")
	}
	if c.s.cfg.WorkerInFlight > 0 {
		emit(mWorkerAhead, float64(bs.Ahead), "used")
		emit(mWorkerAhead, float64(bs.Relooked), "relooked")
	}
	if c.s.cfg.Coalescer != nil {
		emit(mBatchesPath, float64(bs.Direct), "direct")
		emit(mBatchesPath, float64(bs.Shared), "shared")
		for _, st := range c.s.cfg.Coalescer.Stages() {
			sb, n := cumulative(st.Counts, st.Bounds, time.Duration.Seconds)
			ch <- prom.Histogram(mSharedStage, n, st.Sum.Seconds(), sb, st.Stage.String())
		}
	}
}

// latencyHistogram is ls as a histogram of seconds (labels: desc's).
func latencyHistogram(desc *prometheus.Desc, ls LatencyStats, labels ...string) prometheus.Metric {
	lb, cum := cumulative(ls.Counts, ls.Bounds, time.Duration.Seconds)
	return prom.Histogram(desc, cum, ls.Sum.Seconds(), lb, labels...)
}

// cumulative turns per-bucket counts (the last one past the last bound)
// into a histogram's cumulative buckets keyed by bound (in the unit
// 'value' gives) and the total count. The count is the buckets' total,
// not a separate counter: the two would be read at different instants
// and the library writes one value for both.
func cumulative[B any](counts []uint64, bounds []B, value func(B) float64) (map[float64]uint64, uint64) {
	m := make(map[float64]uint64, len(bounds))
	var cum uint64
	for i, n := range counts {
		cum += n
		if i < len(bounds) {
			m[value(bounds[i])] = cum
		}
	}
	return m, cum
}

// WriteMetrics writes the switch's Collector in the Prometheus text format.
func WriteMetrics(w io.Writer, s *Switch) error { return prom.WriteText(w, s.Collector()) }

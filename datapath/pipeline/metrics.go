package pipeline

import (
	"fmt"
	"io"

	"github.com/gswitch/gswitch/internal/prom"
)

// WriteMetrics writes the switch's counters in the Prometheus text format:
// per port gswitch_port_{rx,tx}_{packets,bytes}_total and
// gswitch_port_{rx,tx}_dropped_total; per table gswitch_table_flows,
// gswitch_table_lookups_total, gswitch_table_matched_total,
// gswitch_table_lpm (1 while LPM-shaped and served by LPM),
// gswitch_table_lpm_transitions_total and gswitch_table_lpm_conflicts;
// gswitch_malformed_frames_total{reason}, gswitch_table_miss_drops_total,
// gswitch_no_route_total, gswitch_unsupported_actions_total,
// gswitch_learned_macs and gswitch_standalone.
func WriteMetrics(w io.Writer, s *Switch) error {
	pw := prom.New(w)
	p := pw.Printf
	head := pw.Head
	ports := s.PortInfos()
	portMetric := func(name, help string, v func(*PortInfo) uint64) {
		head(name, "counter", help)
		for i := range ports {
			p("%s{port=\"%d\",name=%q} %d\n", name, ports[i].Desc.No, ports[i].Desc.Name, v(&ports[i]))
		}
	}
	portMetric("gswitch_port_rx_packets_total", "Frames received.", func(pi *PortInfo) uint64 { return pi.Stats.RxPackets })
	portMetric("gswitch_port_rx_bytes_total", "Bytes received.", func(pi *PortInfo) uint64 { return pi.Stats.RxBytes })
	portMetric("gswitch_port_tx_packets_total", "Frames sent.", func(pi *PortInfo) uint64 { return pi.Stats.TxPackets })
	portMetric("gswitch_port_tx_bytes_total", "Bytes sent.", func(pi *PortInfo) uint64 { return pi.Stats.TxBytes })
	portMetric("gswitch_port_rx_dropped_total", "Received frames dropped (malformed, table miss, no route).", func(pi *PortInfo) uint64 { return pi.Stats.RxDropped })
	portMetric("gswitch_port_tx_dropped_total", "Frames the device refused.", func(pi *PortInfo) uint64 { return pi.Stats.TxDropped })
	tables := s.TableInfos()
	head("gswitch_table_flows", "gauge", "Flow entries in the table.")
	for _, t := range tables {
		p("gswitch_table_flows{table=\"%d\"} %d\n", t.ID, t.Active)
	}
	head("gswitch_table_lookups_total", "counter", "Packets looked up in the table.")
	for _, t := range tables {
		p("gswitch_table_lookups_total{table=\"%d\"} %d\n", t.ID, t.Lookups)
	}
	head("gswitch_table_matched_total", "counter", "Packets that matched an entry of the table.")
	for _, t := range tables {
		p("gswitch_table_matched_total{table=\"%d\"} %d\n", t.ID, t.Matched)
	}
	head("gswitch_table_lpm", "gauge", "1 while the table is LPM-shaped and served by longest-prefix match, 0 while the classifier serves it.")
	for _, t := range tables {
		v := 0
		if t.Search == "lpm" {
			v = 1
		}
		p("gswitch_table_lpm{table=\"%d\"} %d\n", t.ID, v)
	}
	head("gswitch_table_lpm_transitions_total", "counter", "Changes of the table between LPM and classifier serving.")
	for _, t := range tables {
		p("gswitch_table_lpm_transitions_total{table=\"%d\"} %d\n", t.ID, t.LPM.Transitions)
	}
	head("gswitch_table_lpm_conflicts", "gauge", "Prefixes of the table whose priorities break longest-prefix order.")
	for _, t := range tables {
		p("gswitch_table_lpm_conflicts{table=\"%d\"} %d\n", t.ID, t.LPM.Conflicts)
	}
	c := s.Counters()
	head("gswitch_malformed_frames_total", "counter", "Frames dropped because their headers could not be parsed, by reason.")
	for r, n := range c.Malformed {
		p("gswitch_malformed_frames_total{reason=%q} %d\n", r, n)
	}
	head("gswitch_table_miss_drops_total", "counter", "Packets dropped on a table miss without a table-miss entry.")
	p("gswitch_table_miss_drops_total %d\n", c.MissDrops)
	head("gswitch_no_route_total", "counter", "Outputs to a missing port, the input port, or LOCAL.")
	p("gswitch_no_route_total %d\n", c.NoRoute)
	head("gswitch_unsupported_actions_total", "counter", "Actions the datapath did not execute (groups, MPLS, PBB, fields it cannot set).")
	p("gswitch_unsupported_actions_total %d\n", c.Unsupported)
	head("gswitch_group_drops_total", "counter", "Packets of a group with no live bucket.")
	p("gswitch_group_drops_total %d\n", c.GroupDrops)
	head("gswitch_meter_drops_total", "counter", "Packets a meter's drop band dropped.")
	p("gswitch_meter_drops_total %d\n", c.MeterDrops)
	head("gswitch_offload_drops_total", "counter", "Received frames whose checksum or segmentation offload could not be finished.")
	p("gswitch_offload_drops_total %d\n", c.OffloadDrops)
	bs := s.BatchStats()
	head("gswitch_batch_frames", "histogram", "Frames per batch run through the pipeline.")
	var cum uint64
	for i, n := range bs.Counts {
		cum += n
		le := "+Inf"
		if i < len(bs.Bounds) {
			le = fmt.Sprint(bs.Bounds[i])
		}
		p("gswitch_batch_frames_bucket{le=%q} %d\n", le, cum)
	}
	p("gswitch_batch_frames_sum %d\ngswitch_batch_frames_count %d\n", bs.Frames, bs.Batches)
	head("gswitch_batches_closed_total", "counter", "Batches a port loop closed, by why: full (batch size reached) or delay (the oldest frame waited the maximum delay).")
	p("gswitch_batches_closed_total{why=\"full\"} %d\ngswitch_batches_closed_total{why=\"delay\"} %d\n", bs.Full, bs.Delay)
	head("gswitch_learned_macs", "gauge", "MAC addresses in the learning table.")
	p("gswitch_learned_macs %d\n", c.Learned)
	standalone := 0
	if c.Standalone {
		standalone = 1
	}
	head("gswitch_standalone", "gauge", "1 while the switch acts as a learning switch (standalone fail mode, no controller).")
	p("gswitch_standalone %d\n", standalone)
	return pw.Err()
}

package pipeline

import (
	"strings"
	"time"

	"github.com/gswitch/gswitch/datapath/afpacket"
	"github.com/gswitch/gswitch/datapath/packet"
	"github.com/gswitch/gswitch/tables/flow"
	"github.com/gswitch/gswitch/tables/rule"
)

// PortInfo is a port's description and counters, for the control socket
// and metrics.
type PortInfo struct {
	Desc  rule.Port
	Up    bool
	Stats rule.PortStats
	// RxQueues is the number of receive queues the device reads the port
	// with (afpacket's Config.Queues; 1 for a device without queues), and
	// RxQueuePackets the frames each has received (their sum is
	// Stats.RxPackets; nil for a device without queues).
	RxQueues       int
	RxQueuePackets []uint64 `json:",omitempty"`
}

// queued is a Device with receive queues (*afpacket.Port).
type queued interface {
	Queues() int
	QueueStats(i int) (afpacket.Stats, error)
}

// rxQueues returns the number of receive queues of a port's device and
// the frames each received.
func (p *swPort) rxQueues() (int, []uint64) {
	q, ok := p.dev.(queued)
	if !ok {
		return 1, nil
	}
	n := q.Queues()
	rx := make([]uint64, n)
	for i := range rx {
		st, _ := q.QueueStats(i) // a closed device still reports its counters
		rx[i] = st.RxPackets
	}
	return n, rx
}

// TableInfo is a table's counters and its classifier's figures.
type TableInfo struct {
	ID      uint8
	Active  int
	Lookups uint64
	Matched uint64
	// Search says how lookups are answered now: "lpm" for an LPM-shaped
	// table (tables/lpmshape), else the classifier's algorithm (tuple, ...).
	Search string
	LPM    LPMInfo
	Flow   flow.Stats
}

// FlowInfo is one flow entry in text (the match as tables/flow writes it,
// the instructions in ovs-ofctl's words) with its counters.
type FlowInfo struct {
	Table        uint8
	Priority     uint16
	Cookie       uint64
	Match        string
	Instructions string
	IdleTimeout  uint16
	HardTimeout  uint16
	Flags        uint16
	Packets      uint64
	Bytes        uint64
	Duration     time.Duration
}

// Counters are the switch's own drop and mode counters.
type Counters struct {
	Malformed   map[string]uint64 // by packet.Reason name
	MissDrops   uint64            // table misses without a table-miss entry
	NoRoute     uint64            // outputs to a missing port, the in port, or LOCAL
	Unsupported uint64            // actions not executed
	GroupDrops  uint64            // packets of a group with no live bucket
	MeterDrops  uint64            // packets dropped by a meter's drop band
	// OffloadDrops counts received frames that could not be finished
	// (truncated by a frame ring, afpacket's RingFrames), or whose checksum or segmentation
	// offload could not be finished (afpacket.ErrOffload), dropped.
	OffloadDrops uint64
	Learned      int  // MAC addresses in the learning table
	Standalone   bool // acting as a learning switch now
	FailMode     string
}

// PortInfos describes every port.
func (s *Switch) PortInfos() []PortInfo {
	out := make([]PortInfo, len(s.portList))
	for i, p := range s.portList {
		out[i] = PortInfo{Desc: p.desc(), Up: p.up(), Stats: p.stats()}
		out[i].RxQueues, out[i].RxQueuePackets = p.rxQueues()
	}
	return out
}

// TableInfos describes every table.
func (s *Switch) TableInfos() []TableInfo {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]TableInfo, len(s.tables))
	for i, t := range s.tables {
		out[i] = TableInfo{ID: t.id, Active: t.ft.Len(), Lookups: t.lookups.Load(), Matched: t.matched.Load(), Flow: t.ft.Stats(),
			Search: t.ft.Config().Algo.String()}
		if t.lpm != nil {
			out[i].Search, out[i].LPM = t.lpm.Search(t.ft.Config().Algo), t.lpm.Info()
		}
	}
	return out
}

// Flows dumps every flow entry, table by table.
func (s *Switch) Flows() []FlowInfo {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []FlowInfo
	now := time.Now()
	for _, t := range s.tables {
		for _, e := range t.entries {
			if e == nil {
				continue
			}
			out = append(out, FlowInfo{
				Table: t.id, Priority: e.fm.Priority, Cookie: e.fm.Cookie, Match: e.fm.Match.String(),
				Instructions: FormatInstructions(&e.fm.Instructions), IdleTimeout: e.fm.IdleTimeout,
				HardTimeout: e.fm.HardTimeout, Flags: uint16(e.fm.Flags), Packets: e.packets.Load(),
				Bytes: e.bytes.Load(), Duration: now.Sub(e.added),
			})
		}
	}
	return out
}

// Counters returns the switch's own counters.
func (s *Switch) Counters() Counters {
	c := Counters{Malformed: map[string]uint64{}, MissDrops: s.missDrops.Load(), NoRoute: s.noRoute.Load(),
		Unsupported: s.unsupported.Load(), GroupDrops: s.groupDrops.Load(), MeterDrops: s.meterDrops.Load(), OffloadDrops: s.offloadDrops.Load(), Learned: s.learn.len(), Standalone: s.standalone(), FailMode: s.cfg.FailMode.String()}
	for r := packet.Reason(1); r < packet.NumReasons; r++ {
		c.Malformed[r.String()] = s.malformed[r].Load()
	}
	return c
}

// GroupInfo is one group: its type, buckets in text and counters.
type GroupInfo struct {
	ID       uint32
	Type     string // all, select, indirect, ff
	RefCount uint32
	Packets  uint64
	Bytes    uint64
	Duration time.Duration
	Buckets  []BucketInfo
}

// BucketInfo is one bucket of a group.
type BucketInfo struct {
	Weight     uint16
	WatchPort  uint32
	WatchGroup uint32
	Actions    string
	Packets    uint64
	Bytes      uint64
}

// MeterInfo is one meter: its flags, bands and counters.
type MeterInfo struct {
	ID        uint32
	Flags     string // kbps or pktps, burst, stats
	FlowCount uint32
	PacketsIn uint64
	BytesIn   uint64
	Duration  time.Duration
	Bands     []BandInfo
}

// BandInfo is one band of a meter and the packets it applied to.
type BandInfo struct {
	Type      string // drop or dscp_remark
	Rate      uint32
	BurstSize uint32
	PrecLevel uint8
	Packets   uint64
	Bytes     uint64
}

// Groups describes every group, ascending by id.
func (s *Switch) Groups() []GroupInfo {
	stats := map[uint32]rule.GroupStats{}
	for _, gs := range s.groups.Stats(rule.GroupAll) {
		stats[gs.ID] = gs
	}
	descs := s.groups.Desc()
	out := make([]GroupInfo, 0, len(descs))
	for _, g := range descs {
		st := stats[g.ID]
		gi := GroupInfo{ID: g.ID, Type: g.Type.String(), RefCount: st.RefCount, Packets: st.Packets, Bytes: st.Bytes,
			Duration: time.Duration(st.DurationSec)*time.Second + time.Duration(st.DurationNsec)}
		for i, b := range g.Buckets {
			bi := BucketInfo{Weight: b.Weight, WatchPort: b.WatchPort, WatchGroup: b.WatchGroup, Actions: formatActions(b.Actions)}
			if i < len(st.Buckets) {
				bi.Packets, bi.Bytes = st.Buckets[i].Packets, st.Buckets[i].Bytes
			}
			gi.Buckets = append(gi.Buckets, bi)
		}
		out = append(out, gi)
	}
	return out
}

// Meters describes every meter, ascending by id.
func (s *Switch) Meters() []MeterInfo {
	stats := map[uint32]rule.MeterStats{}
	for _, ms := range s.meters.Stats(rule.MeterAll) {
		stats[ms.ID] = ms
	}
	cfgs := s.meters.Config(rule.MeterAll)
	out := make([]MeterInfo, 0, len(cfgs))
	for _, mc := range cfgs {
		st := stats[mc.ID]
		mi := MeterInfo{ID: mc.ID, Flags: meterFlags(mc.Flags), FlowCount: st.FlowCount, PacketsIn: st.PacketsIn, BytesIn: st.BytesIn,
			Duration: time.Duration(st.DurationSec)*time.Second + time.Duration(st.DurationNsec)}
		for i, b := range mc.Bands {
			bi := BandInfo{Type: "drop", Rate: b.Rate, BurstSize: b.BurstSize, PrecLevel: b.PrecLevel}
			if b.Type == rule.BandDSCPRemark {
				bi.Type = "dscp_remark"
			}
			if i < len(st.Bands) {
				bi.Packets, bi.Bytes = st.Bands[i].Packets, st.Bands[i].Bytes
			}
			mi.Bands = append(mi.Bands, bi)
		}
		out = append(out, mi)
	}
	return out
}

func meterFlags(f rule.MeterFlags) string {
	var parts []string
	for _, x := range []struct {
		bit  rule.MeterFlags
		name string
	}{{rule.MeterKbps, "kbps"}, {rule.MeterPktps, "pktps"}, {rule.MeterBurst, "burst"}, {rule.MeterStatsFlag, "stats"}} {
		if f&x.bit != 0 {
			parts = append(parts, x.name)
		}
	}
	return strings.Join(parts, ",")
}

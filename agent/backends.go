package agent

import (
	"github.com/gswitch/gswitch/agent/ctl"
	"github.com/gswitch/gswitch/gpu"
)

// backend is the answer to /v1/backend: the Engine's state, each table
// marked with the part of the agent it belongs to (the range of table ids
// that holds it), an LPM-shaped flow table's image with its flow table's
// number, and the path the datapath's lookups of it take: "shared" for a
// flow table on the device while there is a Coalescer (the shared device
// batches of all ports and queues), else "direct" (each receive batch's
// lookups straight to the Engine; LPM tables are always looked up so).
func (d *Agent) backend() gpu.EngineStats {
	st := d.eng.Stats()
	ranges := d.ids.Ranges()
	for i := range st.Tables {
		tb := &st.Tables[i]
		for _, r := range ranges {
			if r.Contains(tb.Table) {
				tb.Owner = r.Owner
				if r.Owner == lpmShapeIDsOwner {
					tb.OwnerTable = uint32(tb.Table-r.First) >> 16 & 0xff // lpmshape: base | table<<16 | slot
				}
				break
			}
		}
		tb.Path = "direct"
		if d.co != nil && tb.Kind == gpu.Flow.String() && tb.Backend == gpu.OnDevice.String() {
			tb.Path = "shared"
		}
	}
	return st
}

// batchPaths counts the receive batches by the path they ran
// (pipeline.BatchStats: metric gswitch_batches_path_total).
func (d *Agent) batchPaths() ctl.BatchPaths {
	bs := d.sw.BatchStats()
	return ctl.BatchPaths{Direct: bs.Direct, Shared: bs.Shared, Worker: bs.Worker}
}

package agent

import "github.com/gswitch/gswitch/datapath/pipeline"

// addRxStage appends st to port no's receive stages. The switch's
// SetRxStages replaces a port's whole list, so every part that puts a
// stage on a port (content-based forwarding, and the others to come) goes
// through here; stages run in the order they were added. Called from New
// only (before any goroutine runs), so the map needs no lock.
func (d *Agent) addRxStage(no uint32, st pipeline.RxStage) error {
	if d.rxStages == nil {
		d.rxStages = map[uint32][]pipeline.RxStage{}
	}
	d.rxStages[no] = append(d.rxStages[no], st)
	return d.sw.SetRxStages(no, d.rxStages[no]...)
}

package gpu

import (
	"fmt"
	"math"
)

// Placement says which backend serves a table's lookups.
type Placement uint8

// The placements of a table.
const (
	OnCPU    Placement = iota // every lookup on the CPU backend
	OnDevice                  // batches of MinBatch keys or more on the devices
)

func (p Placement) String() string {
	if p == OnDevice {
		return "device"
	}
	return "cpu"
}

// Costs are the inputs of the auto placement of one table, measured by a
// calibration (see Engine): what a lookup costs per key on the CPU backend,
// on the table's own keys, and what it costs per key on a device, amortised
// over one batch of Batch keys (the wall time of the batch — copy in,
// kernel, copy out — divided by Batch).
type Costs struct {
	CPUNsPerKey    float64
	DeviceNsPerKey float64
	Batch          int
}

// SwitchMargin is the hysteresis of Choose: a table moves to the other
// backend only when that one is at least SwitchMargin times cheaper per key,
// so that a table whose costs are close does not flip at every
// recalibration.
const SwitchMargin = 1.25

// Choose is the auto placement rule: given the table's current placement
// and its measured costs, it returns where the table's lookups go and a
// line saying why. It is pure: every input is in its arguments.
//
//   - A batch below minBatch never reaches a device, and a cost that was not
//     measured (zero, negative or not a number) is no reason to move: the
//     table stays on (or goes back to) the CPU.
//   - From the CPU, the table moves to the device when
//     DeviceNsPerKey * SwitchMargin < CPUNsPerKey.
//   - From the device, it moves back when
//     CPUNsPerKey * SwitchMargin < DeviceNsPerKey.
//   - Otherwise it stays where it is.
func Choose(cur Placement, c Costs, minBatch int) (Placement, string) {
	ok := func(x float64) bool { return x > 0 && !math.IsInf(x, 0) && !math.IsNaN(x) }
	switch {
	case c.Batch <= 0 || c.Batch < minBatch:
		return OnCPU, fmt.Sprintf("batches of %d keys are below --min-batch %d", c.Batch, minBatch)
	case !ok(c.CPUNsPerKey) || !ok(c.DeviceNsPerKey):
		return OnCPU, "costs not measured"
	}
	cost := fmt.Sprintf("cpu %s vs device %s per key at %d-key batches", fmtNs(c.CPUNsPerKey), fmtNs(c.DeviceNsPerKey), c.Batch)
	switch {
	case cur == OnCPU && c.DeviceNsPerKey*SwitchMargin < c.CPUNsPerKey:
		return OnDevice, cost + ": the device is cheaper"
	case cur == OnDevice && c.CPUNsPerKey*SwitchMargin < c.DeviceNsPerKey:
		return OnCPU, cost + ": the CPU is cheaper"
	case cur == OnDevice:
		return OnDevice, cost + ": the device is cheaper or within the margin"
	}
	return OnCPU, cost + ": the CPU is cheaper or within the margin"
}

// fmtNs writes a cost in nanoseconds with three significant digits.
func fmtNs(ns float64) string {
	switch {
	case ns >= 100:
		return fmt.Sprintf("%.0f ns", ns)
	case ns >= 10:
		return fmt.Sprintf("%.1f ns", ns)
	}
	return fmt.Sprintf("%.2f ns", ns)
}

// TableBackend is what serves one table of an Engine and why
// (Engine.TableBackends).
type TableBackend struct {
	Table   TableID
	Kind    string // flow, lpm4, lpm6
	Backend string // "cpu" or "device"
	// Mode is the Engine's: auto (calibrated placement), gpu (every table
	// on the devices), cpu (no device), or auto with no usable device.
	Mode string
	// Classes is a flow table's cuckoo classes (tuple, bloom, merge) or
	// linear slots in use, as of its last calibration: what the CPU's cost
	// grows with.
	Classes        int
	CPUNsPerKey    float64 // measured by the last calibration (0: none)
	DeviceNsPerKey float64 // amortised over Batch keys (0: not measured)
	Batch          int
	// DeviceFrom is the smallest batch of a flow table on the devices
	// that goes to a device, from its calibration (AutoConfig.SmallBatch;
	// 0: MinBatch), then from the traffic: TrafficCPUNsPerKey is the
	// median CPU cost per key of the table's last timed lookups below the
	// floor, on the datapath's own keys (0: none since the calibration).
	DeviceFrom         int
	TrafficCPUNsPerKey float64
	Calibrations       uint64 // calibrations run for the table
	Reason             string

	// Set by the agent, empty from the Engine: the part of the agent the
	// table belongs to (its range of table ids: "flow tables", "lpm-shaped
	// flow tables", the router's route tables), for an LPM-shaped flow
	// table's image the flow table's number (OwnerTable), and the path
	// its lookups take in the datapath (Path): "shared" (in the shared
	// device batches of all ports and queues, gpu.Coalescer) or "direct"
	// (each batch's lookups straight to the Engine: on the CPU, or on the
	// device for batches of MinBatch keys or more).
	Owner      string `json:",omitempty"`
	OwnerTable uint32 `json:",omitempty"`
	Path       string `json:",omitempty"`
}

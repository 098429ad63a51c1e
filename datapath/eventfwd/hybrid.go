package eventfwd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/gswitch/gswitch/tables/bubble"
	"github.com/gswitch/gswitch/tables/pubsub"
)

// Device is a matcher that holds a copy of the table's device layout
// (pubsub.Device) and is kept up to date by its bubble updates:
// gpu.EventDevice (the CUDA matcher, or gpu.LayoutDevice, its Go twin).
type Device interface {
	Name() string
	Describe() string
	Match(evs []pubsub.Event, out [][]uint32) ([][]uint32, error)
	Update(u bubble.Update, names map[string]uint32) error
	Close() error
}

// LiveDevice is a Device that may apply bubble updates (not whole images)
// while batches are matched on it, each batch seeing the whole of an update
// or none of it and every batch queued after Update returns seeing it
// (gpu.CUDAMatcher in its default update mode). UpdatesLive says whether
// it does so now.
type LiveDevice interface {
	UpdatesLive() bool
}

// SlotMatcher is a Device that also says which filter slot decided each
// delivery (gpu.EventDevice.MatchSlots): complete is false when it could
// not bring back every slot.
type SlotMatcher interface {
	MatchSlots(evs []pubsub.Event, out [][]uint32, slots []uint32) (res [][]uint32, s []uint32, complete bool, err error)
}

// DefaultMinBatch is the fewest events a batch must have to be matched on
// the device. A device round trip (encode, copy in, kernel, copy out)
// costs over 20 µs however small the batch (23–25 µs p50 for one event on
// the H200, 2026-11-26), while the CPU matcher takes 20–35 µs per event of
// CCM's default scenario on one core: below a few events the CPU answers
// as soon, and the CPU's answer is the same, so small batches stay there.
const DefaultMinBatch = 16

// HybridConfig configures a Hybrid.
type HybridConfig struct {
	Table *pubsub.Table
	// Open opens the device on the table's current layout (for example
	// gpu.OpenEventDevice).
	Open func(l *pubsub.Layout) (Device, error)
	// MinBatch: batches of fewer events are matched on the CPU; 0:
	// DefaultMinBatch.
	MinBatch int
	// CPUDuringUpdates sends a batch that finds the device being updated
	// to the CPU instead of waiting for the update (a few copies: tens of
	// µs for a change's bubbles, a few ms for a full image), the
	// behaviour before 2026-11-26. Under steady subscription churn it
	// sends a large share of the batches to the CPU, each hundreds of
	// times slower there (bench pubsub --churn), so the default waits.
	CPUDuringUpdates bool
	Log              *slog.Logger
}

// Hybrid is the event stage's Matcher with a device: batches of at least
// MinBatch events are matched on the device, smaller ones on the CPU
// (pubsub.Table.MatchBatch), and a batch the device fails on is matched
// again on the CPU (counted as a fallback). Subscription changes reach the
// device through Sync: the table's device layout (pubsub.Device) is
// brought up to date and its bubble update applied to the device — the
// path every mirrored table takes. Sync is the subscription service's
// barrier (pubsubapi.Config.Barrier), so a change is acknowledged only once
// the device has it. A failed update turns the device off: the CPU serves
// every batch from then on (the table's own lock is then the barrier), and
// Counters says why.
//
// Subscription match counters (pubsub.Subscription.Matches) count the
// device's matches too: a device that implements SlotMatcher (the CUDA
// matcher, the layout device) brings back, per event and port, the slot of
// the filter that decided the delivery, and the table credits its
// subscription (pubsub.Table.CountSlots); when a batch matched more
// deliveries than the device brings slots back for, the batch is matched
// again on the CPU for its counters (Recounts). A device that does not
// implement it leaves its matches uncounted.
//
// Concurrency: mu orders device batches (held shared for a batch's Match)
// against the device's update (held exclusively, so that no batch sees a
// half-written layout); a batch that finds mu taken or wanted by an update
// waits for it (RLock), or with CPUDuringUpdates is matched on the CPU
// instead (TryRLock). A LiveDevice's bubble updates do not take mu: the
// device orders them against its batches itself, so batches go on while
// subscriptions change (only a whole image still holds them). syncMu serializes
// Syncs and guards the layout image; Sync builds the update under the
// table's read lock before it takes mu. Lock order: syncMu > mu; the
// table's lock is taken inside its own calls and never held while mu is
// awaited. The counters are atomics.
type Hybrid struct {
	t   *pubsub.Table
	dev Device
	min int
	log *slog.Logger
	try bool // CPUDuringUpdates

	mu     sync.RWMutex
	syncMu sync.Mutex     // serializes Syncs
	img    *pubsub.Device // guarded by syncMu

	off     atomic.Bool
	offWhy  atomic.Pointer[string]
	lastErr atomic.Pointer[string]

	devBatches, devEvents, cpuBatches, cpuEvents, fallbacks, updates, bubbles, recounts atomic.Uint64
}

// NewHybrid builds the table's device layout and opens the device on it.
func NewHybrid(c HybridConfig) (*Hybrid, error) {
	switch {
	case c.Table == nil:
		return nil, errors.New("eventfwd: hybrid matcher without a table")
	case c.Open == nil:
		return nil, errors.New("eventfwd: hybrid matcher without a device")
	case c.MinBatch < 0:
		return nil, fmt.Errorf("eventfwd: min batch %d", c.MinBatch)
	}
	h := &Hybrid{t: c.Table, min: c.MinBatch, log: c.Log, try: c.CPUDuringUpdates}
	if h.min == 0 {
		h.min = DefaultMinBatch
	}
	if h.log == nil {
		h.log = slog.Default()
	}
	h.img = pubsub.NewDevice(c.Table)
	h.img.Mirror().Sync() // the device opens on this image: no update owed
	dev, err := c.Open(h.img.Layout())
	if err != nil {
		return nil, err
	}
	h.dev = dev
	return h, nil
}

// MatchBatch matches a batch: on the device when it has at least MinBatch
// events and the device is on and not being updated, else (and when the
// device fails) on the CPU, which has every change already.
func (h *Hybrid) MatchBatch(evs []pubsub.Event, out [][]uint32) [][]uint32 {
	if len(evs) >= h.min && !h.off.Load() && h.rlock() {
		var res [][]uint32
		var err error
		var slots []uint32
		complete := false
		sm, counts := h.dev.(SlotMatcher)
		if counts {
			res, slots, complete, err = sm.MatchSlots(evs, out, nil)
		} else {
			res, err = h.dev.Match(evs, out)
		}
		h.mu.RUnlock()
		if err == nil && len(res) == len(evs) {
			h.devBatches.Add(1)
			h.devEvents.Add(uint64(len(evs)))
			switch {
			case counts && complete:
				h.t.CountSlots(slots)
			case counts:
				h.recounts.Add(1)
				h.t.MatchBatch(evs, nil)
			}
			return res
		}
		if err == nil {
			err = fmt.Errorf("device answered %d events of %d", len(res), len(evs))
		}
		if h.fallbacks.Add(1) == 1 {
			h.log.Warn("pubsub: device matching failed, the batch was matched on the CPU", "err", err)
		}
		s := err.Error()
		h.lastErr.Store(&s)
		out = res
	}
	h.cpuBatches.Add(1)
	h.cpuEvents.Add(uint64(len(evs)))
	return h.t.MatchBatch(evs, out)
}

// Sync brings the device up to date with the table (the subscription
// service's barrier). A device that fails the update is turned off (the
// CPU serves from then on) and Sync returns nil: the change is visible to
// the datapath either way.
func (h *Hybrid) Sync(context.Context) error {
	h.syncMu.Lock()
	defer h.syncMu.Unlock()
	if h.off.Load() {
		return nil
	}
	u := h.img.Update(h.t) // the table's read lock, not mu: batches go on
	if u.Full == nil && len(u.Bubbles) == 0 {
		return nil
	}
	var err error
	if ld, ok := h.dev.(LiveDevice); ok && u.Full == nil && ld.UpdatesLive() {
		err = h.dev.Update(u, h.img.Layout().Names)
	} else {
		h.mu.Lock()
		err = h.dev.Update(u, h.img.Layout().Names)
		h.mu.Unlock()
	}
	if err != nil {
		s := "update failed: " + err.Error()
		h.offWhy.Store(&s)
		h.off.Store(true)
		h.log.Error("pubsub: the device's layout update failed; the CPU matches every batch from now on", "err", err)
		return nil
	}
	h.updates.Add(1)
	h.bubbles.Add(uint64(len(u.Bubbles)))
	return nil
}

// rlock takes mu shared for a device batch: waiting for an update, or
// (CPUDuringUpdates) only if no update holds or wants it.
func (h *Hybrid) rlock() bool {
	if h.try {
		return h.mu.TryRLock()
	}
	h.mu.RLock()
	return true
}

// HybridCounters are a Hybrid's counters.
type HybridCounters struct {
	Device   string // the device's description
	Off      string // why the device is off ("" while on)
	MinBatch int
	// Batches and events matched on the device and on the CPU (small
	// batches, fallbacks, and everything while off); Fallbacks counts
	// device failures, LastError the latest.
	DeviceBatches, DeviceEvents, CPUBatches, CPUEvents, Fallbacks uint64
	LastError                                                     string
	// Updates counts the layout updates applied to the device, Bubbles
	// the words they wrote (a full image counts none).
	Updates, Bubbles uint64
	// Recounts counts device batches matched again on the CPU for the
	// subscriptions' counters (more deliveries than deciding slots came
	// back).
	Recounts uint64
}

// Backend names what serves the batches: the device's name, or "cpu".
func (h *Hybrid) Backend() string {
	if h.off.Load() {
		return "cpu"
	}
	return h.dev.Name()
}

// Counters returns the counters.
func (h *Hybrid) Counters() HybridCounters {
	c := HybridCounters{Device: h.dev.Describe(), MinBatch: h.min,
		DeviceBatches: h.devBatches.Load(), DeviceEvents: h.devEvents.Load(), CPUBatches: h.cpuBatches.Load(),
		CPUEvents: h.cpuEvents.Load(), Fallbacks: h.fallbacks.Load(), Updates: h.updates.Load(), Bubbles: h.bubbles.Load(), Recounts: h.recounts.Load()}
	if s := h.offWhy.Load(); s != nil {
		c.Off = *s
	}
	if s := h.lastErr.Load(); s != nil {
		c.LastError = *s
	}
	return c
}

// Close closes the device (after the batches on it).
func (h *Hybrid) Close() error {
	h.syncMu.Lock()
	defer h.syncMu.Unlock()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.off.Store(true)
	if h.offWhy.Load() == nil {
		s := "closed"
		h.offWhy.Store(&s)
	}
	return h.dev.Close()
}

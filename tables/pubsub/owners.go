package pubsub

import "sync/atomic"

// slotOwners maps each filter slot to the subscription that owns it (nil:
// free), for CountSlots, which reads it without the table's lock: a
// device's batch credits its deciding slots while a subscription change
// holds the write lock, instead of waiting for it (a change holds it about
// 5 µs; under 10,000 changes per second a batch of 300 µs would otherwise
// wait for about three of them).
//
// The slots are in blocks of ownerBlock entries; the list of blocks is
// published through an atomic pointer and only grows (a new list holding
// the same blocks and new ones), so a reader that loaded an older list
// sees the same entries for the slots it has. Writers hold the table's
// write lock (they are serialized): grow, then store entries (a bulk add
// stores its slots' entries from several goroutines, each its own slots).
// A reader may credit a subscription that is being removed, or the new
// owner of a slot freed and taken again since the device matched: the
// counters are those of the deciding filters as the table had them
// around the batch, as before.
type slotOwners struct {
	blocks atomic.Pointer[[]*ownerBlock]
}

const ownerBlockBits = 12

type ownerBlock [1 << ownerBlockBits]atomic.Pointer[subscription]

// grow makes room for slots [0, n) (t.mu held exclusively).
func (o *slotOwners) grow(n int) {
	var have []*ownerBlock
	if p := o.blocks.Load(); p != nil {
		have = *p
	}
	need := (n + 1<<ownerBlockBits - 1) >> ownerBlockBits
	if need <= len(have) {
		return
	}
	bl := make([]*ownerBlock, need)
	copy(bl, have)
	for i := len(have); i < need; i++ {
		bl[i] = new(ownerBlock)
	}
	o.blocks.Store(&bl)
}

// set records slot s's owner (t.mu held exclusively; s below grow's n).
func (o *slotOwners) set(s uint32, sub *subscription) {
	(*o.blocks.Load())[s>>ownerBlockBits][s&(1<<ownerBlockBits-1)].Store(sub)
}

// get returns slot s's owner, nil when free or unknown (any goroutine).
func (o *slotOwners) get(s uint32) *subscription {
	p := o.blocks.Load()
	if p == nil || int(s>>ownerBlockBits) >= len(*p) {
		return nil
	}
	return (*p)[s>>ownerBlockBits][s&(1<<ownerBlockBits-1)].Load()
}

package pipeline

import "time"

// How long changes hold the datapath back. A writer of mu (a FLOW_MOD, an
// expiry that found expired entries, a GROUP_MOD, ...) stops every batch
// that has not taken the read lock yet from the moment it asks for the
// lock (Go's RWMutex lets no reader in past a waiting writer) until it
// releases it, and it waits for the batches in flight first. lockWrite
// and unlockWrite time that span per kind of change into a histogram (WriteLockStats,
// metric gswitch_switch_write_lock_seconds{op}), so that a control plane
// that stalls the datapath shows as such: the flow expiry's walk over
// 131,072 entries under the write lock, 4 ms four times a second, was the
// millisecond tail of the frames' latency (H200 machine, 2026-11-26) and
// was found only through an execution trace.

// WriteOp is what held the switch's lock for writing.
type WriteOp int

const (
	WriteFlowMod     WriteOp = iota // FlowMod
	WriteExpire                     // Expire, when entries were due
	WriteGroupMod                   // GroupMod
	WriteMeterMod                   // MeterMod
	WriteBarrier                    // Barrier
	WriteTransaction                // Transact, TransactGroups (P4Runtime batches)
	WriteOther                      // the rest (benchmark switches)
	numWriteOps
)

var writeOpNames = [numWriteOps]string{"flow_mod", "expire", "group_mod", "meter_mod", "barrier", "transaction", "other"}

func (o WriteOp) String() string {
	if o < 0 || o >= numWriteOps {
		return "other"
	}
	return writeOpNames[o]
}

// lockWrite takes mu for writing and returns when it asked for it;
// unlockWrite releases it and records the span from the request to the
// release for op: defer s.unlockWrite(op, s.lockWrite()) (no closure, so
// no allocation per FLOW_MOD).
func (s *Switch) lockWrite() time.Time {
	t := time.Now()
	s.mu.Lock()
	s.wgen.Add(1)
	return t
}

func (s *Switch) unlockWrite(op WriteOp, since time.Time) {
	s.mu.Unlock()
	s.writeHolds[op].recordN(int64(time.Since(since)), 1)
}

// WriteLockStats returns the histogram of op's spans holding the datapath
// back (see lockWrite); Frames counts the spans.
func (s *Switch) WriteLockStats(op WriteOp) LatencyStats {
	if op < 0 || op >= numWriteOps {
		return LatencyStats{}
	}
	return s.writeHolds[op].snapshot()
}

package pipeline

import (
	"fmt"
	"sync/atomic"
)

// RxStage is a stage of a port's receive path, run on each batch of
// received frames before the switch processes them (the tag the kernel
// removed already put back): redundancy elimination's decoder restores
// encoded frames, live filters count and capture, content-based forwarding
// takes its event packets. Rx returns the frames to process, which may be
// fewer (frames it took or dropped), others (frames it rebuilt, written
// into scratch, an arena the caller owns and resets after the batch; it
// returns the arena grown) or more (redundancy elimination opens a bundle
// frame into the frames in it). frames' backing array may be reused for
// the result (a stage that returns more frames than it got must not
// overrun the frames it has not read yet). A port with several receive queues calls its stages from several
// goroutines at once.
type RxStage interface {
	Rx(port uint32, frames [][]byte, scratch []byte) ([][]byte, []byte)
}

// stageList is a port's stages, replaced whole (copy on write).
type stageList struct{ stages []RxStage }

// SetRxStages sets port no's receive stages, run in order on every batch
// from the next one on (nil or none: no stage). Safe while the port runs.
func (s *Switch) SetRxStages(no uint32, stages ...RxStage) error {
	sp := s.ports[no]
	if sp == nil {
		return fmt.Errorf("pipeline: no port %d", no)
	}
	if len(stages) == 0 {
		sp.stages.Store(nil)
		return nil
	}
	sp.stages.Store(&stageList{stages: append([]RxStage(nil), stages...)})
	return nil
}

// portStages is swPort's field of its stages.
type portStages = atomic.Pointer[stageList]

// receive runs a batch of port no through its stages, then the switch.
func (s *Switch) receive(no uint32, b *batcher) {
	if frames := s.rxStages(no, b); len(frames) > 0 {
		s.Process(no, frames)
	}
}

// rxStages runs port no's receive stages over batch b's frames and returns
// what is left for the pipeline (nothing when a stage took every frame).
func (s *Switch) rxStages(no uint32, b *batcher) [][]byte {
	frames := b.frames
	if sp := s.ports[no]; sp != nil {
		if l := sp.stages.Load(); l != nil {
			for _, st := range l.stages {
				frames, b.scratch = st.Rx(no, frames, b.scratch)
				if len(frames) == 0 {
					return nil
				}
			}
		}
	}
	return frames
}

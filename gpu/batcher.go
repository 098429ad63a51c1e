package gpu

import (
	"fmt"
	"time"
)

// Batcher forms lookup batches from keys that arrive one at a time, the
// datapath's dynamic batching (GSwitch §7.4): a batch is submitted when it
// is full or when its oldest key has waited MaxDelay, whichever comes
// first; batches still in flight are retired in order, each handed to the
// done callback with its results. Routing of small batches to the CPU is
// the backend's (the Engine's MinBatch).
//
// A Batcher is used by one goroutine: the loop that receives packets calls
// Next and Commit per key, and Poll whenever it wakes (after a receive
// burst, or on a timer of MaxDelay/2 when idle).
type Batcher struct {
	be    Backend
	table TableID
	cfg   BatcherConfig
	done  func(*Batch)

	free     []*Batch
	open     *Batch
	openedAt time.Time
	flight   []*Batch // submitted, in order
	all      []*Batch

	stats BatcherStats
}

// BatcherConfig configures a Batcher.
type BatcherConfig struct {
	Kind     Kind
	Width    int           // words per key (see Batch)
	MaxBatch int           // keys per batch
	MaxDelay time.Duration // the longest a key waits for its batch to close (0: until full or Flush)
	Depth    int           // batches in flight at most (0: 4)
}

// BatcherStats counts what a Batcher did.
type BatcherStats struct {
	Batches    uint64        // submitted
	Keys       uint64        // keys in them
	ByDelay    uint64        // batches closed by MaxDelay rather than full
	Latency    time.Duration // sum over batches: first key's arrival to results
	MaxLatency time.Duration
}

// NewBatcher returns a Batcher of cfg's batches for table id of be; done is
// called with every completed batch, in submission order, and must not keep
// it (the batch is reused).
func NewBatcher(be Backend, id TableID, cfg BatcherConfig, done func(*Batch)) (*Batcher, error) {
	if cfg.MaxBatch < 1 || cfg.MaxDelay < 0 {
		return nil, fmt.Errorf("gpu: batcher: batch of %d keys, delay %v", cfg.MaxBatch, cfg.MaxDelay)
	}
	if cfg.Depth <= 0 {
		cfg.Depth = 4
	}
	q := &Batcher{be: be, table: id, cfg: cfg, done: done}
	for i := 0; i < cfg.Depth+1; i++ {
		b, err := be.NewBatch(cfg.Kind, cfg.Width, cfg.MaxBatch)
		if err != nil {
			q.Close()
			return nil, err
		}
		q.free = append(q.free, b)
		q.all = append(q.all, b)
	}
	return q, nil
}

// Next returns the open batch and the index of the key to write next (for
// Flow, word j of the key goes to b.Keys[j*b.Cap+i]); it opens a batch,
// retiring the oldest in flight if none is free. Commit counts the key.
func (q *Batcher) Next() (b *Batch, i int, err error) {
	if q.open == nil {
		if len(q.free) == 0 {
			if err := q.retire(); err != nil {
				return nil, 0, err
			}
		}
		q.open = q.free[len(q.free)-1]
		q.free = q.free[:len(q.free)-1]
		q.open.N = 0
		q.openedAt = time.Now()
	}
	return q.open, q.open.N, nil
}

// Commit counts the key written at the index Next returned; a full batch is
// submitted.
func (q *Batcher) Commit() error {
	if q.open == nil {
		return fmt.Errorf("gpu: batcher: Commit without Next")
	}
	q.open.N++
	if q.open.N == q.open.Cap {
		return q.submit(false)
	}
	return nil
}

// Poll submits the open batch if its oldest key has waited MaxDelay by now,
// and retires the batches in flight that are done (those ahead of the first
// one still running are waited for in order).
func (q *Batcher) Poll(now time.Time) error {
	if q.open != nil && q.open.N > 0 && q.cfg.MaxDelay > 0 && now.Sub(q.openedAt) >= q.cfg.MaxDelay {
		if err := q.submit(true); err != nil {
			return err
		}
	}
	// Retire what is done: the oldest batch is waited for only when the
	// pipeline is full, so Poll never blocks on a young batch otherwise.
	for len(q.flight) > 0 && len(q.flight) >= q.cfg.Depth {
		if err := q.retire(); err != nil {
			return err
		}
	}
	return nil
}

// Flush submits the open batch whatever its age and retires every batch in
// flight.
func (q *Batcher) Flush() error {
	if q.open != nil && q.open.N > 0 {
		if err := q.submit(false); err != nil {
			return err
		}
	}
	for len(q.flight) > 0 {
		if err := q.retire(); err != nil {
			return err
		}
	}
	return nil
}

func (q *Batcher) submit(byDelay bool) error {
	b := q.open
	q.open = nil
	b.Tag = q.openedAt
	if err := q.be.Submit(q.table, b); err != nil {
		q.free = append(q.free, b)
		return err
	}
	q.flight = append(q.flight, b)
	q.stats.Batches++
	q.stats.Keys += uint64(b.N)
	if byDelay {
		q.stats.ByDelay++
	}
	return nil
}

// retire waits for the oldest batch in flight and hands it to done.
func (q *Batcher) retire() error {
	b := q.flight[0]
	q.flight = q.flight[1:]
	err := b.Wait()
	if t0, ok := b.Tag.(time.Time); ok {
		d := time.Since(t0)
		q.stats.Latency += d
		q.stats.MaxLatency = max(q.stats.MaxLatency, d)
	}
	if err == nil && q.done != nil {
		q.done(b)
	}
	q.free = append(q.free, b)
	return err
}

// Stats returns what the Batcher did so far.
func (q *Batcher) Stats() BatcherStats { return q.stats }

// Close waits for the batches in flight (without calling done) and frees
// every batch.
func (q *Batcher) Close() {
	for _, b := range q.flight {
		b.Wait()
	}
	for _, b := range q.all {
		b.Free()
	}
	q.all, q.free, q.flight, q.open = nil, nil, nil, nil
}

package main

import (
	"fmt"
	"slices"
	"time"

	"github.com/gswitch/gswitch/gpu"
)

// pipe runs lookups on the GPU backend the way the datapath does: keys are
// already in the backend's pinned batches (the key extractor writes them
// there), batches are submitted back to back with at most depth in flight
// (copy-in, kernel and copy-out of consecutive batches overlap over the
// streams), and the results are read where they land. Each batch is filled
// once, from the traffic, and submitted again and again.
type pipe struct {
	eng   gpu.Backend
	id    gpu.TableID
	bs    []*gpu.Batch
	depth int
}

// maxPipeBatches bounds the batches a pipe allocates (small batches cycle
// through the traffic's first maxPipeBatches*batch keys).
const maxPipeBatches = 4096

// newPipe allocates batches of batch keys for table id and fills batch i
// with fill(b, i); n is the traffic's size, depth the most batches in
// flight.
func newPipe(eng gpu.Backend, id gpu.TableID, kind gpu.Kind, width, batch, n, depth int, fill func(b *gpu.Batch, i int)) (*pipe, error) {
	nb := min(max((n+batch-1)/batch, depth, 1), maxPipeBatches)
	p := &pipe{eng: eng, id: id, depth: min(depth, nb)}
	for i := 0; i < nb; i++ {
		b, err := eng.NewBatch(kind, width, batch)
		if err != nil {
			p.free()
			return nil, fmt.Errorf("pinned batch %d of %d keys: %w", i, batch, err)
		}
		fill(b, i)
		p.bs = append(p.bs, b)
	}
	return p, nil
}

func (p *pipe) free() {
	for _, b := range p.bs {
		b.Free()
	}
	p.bs = nil
}

// run submits the batches in turn, at most depth in flight, until at least
// total lookups were submitted (total > 0) or the deadline passed; between,
// if not nil, runs before each submit (an update's Apply). It returns the
// lookups completed, the time they took, and each batch's latency in µs
// (from its Submit to its Wait's return).
func (p *pipe) run(total int, deadline time.Time, between func() error) (n int, d time.Duration, lat []float64, err error) {
	type flight struct {
		b  *gpu.Batch
		t0 time.Time
	}
	var ring []flight
	retire := func() error {
		f := ring[0]
		ring = ring[1:]
		if err := f.b.Wait(); err != nil {
			return err
		}
		lat = append(lat, float64(time.Since(f.t0).Nanoseconds())/1e3)
		n += f.b.N
		return nil
	}
	start := time.Now()
	submitted := 0
	for k := 0; ; k++ {
		if total > 0 && submitted >= total || total == 0 && k%8 == 0 && time.Now().After(deadline) {
			break
		}
		if len(ring) == p.depth {
			if err = retire(); err != nil {
				break
			}
		}
		if between != nil {
			if err = between(); err != nil {
				break
			}
		}
		b := p.bs[k%len(p.bs)]
		t0 := time.Now()
		if err = p.eng.Submit(p.id, b); err != nil {
			break
		}
		ring = append(ring, flight{b, t0})
		submitted += b.N
	}
	for len(ring) > 0 {
		if e := retire(); err == nil {
			err = e
		}
	}
	return n, time.Since(start), lat, err
}

// pipeRounds warms the pipe up, then times rounds of at least total
// lookups each; it sets r's end-to-end rate (per second, median), its batch
// latencies and the depth.
func pipeRounds(p *pipe, rounds, total int) (rate float64, lat []float64, err error) {
	if _, _, _, err = p.run(len(p.bs)*p.bs[0].Cap, time.Time{}, nil); err != nil {
		return 0, nil, err
	}
	var rates []float64
	for range rounds {
		n, d, l, err := p.run(total, time.Time{}, nil)
		if err != nil {
			return 0, nil, err
		}
		rates = append(rates, float64(n)/d.Seconds())
		lat = append(lat, l...)
	}
	return median(rates), lat, nil
}

// latencyStats returns the mean and the 99th percentile of lat.
func latencyStats(lat []float64) (mean, p99 float64) {
	if len(lat) == 0 {
		return 0, 0
	}
	s := 0.0
	for _, x := range lat {
		s += x
	}
	lat = slices.Clone(lat)
	return s / float64(len(lat)), percentile(lat, 99)
}

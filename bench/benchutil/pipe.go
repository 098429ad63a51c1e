package benchutil

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/lpm"
)

// Pipe runs lookups on the GPU backend the way the datapath does: keys are
// already in the backend's pinned batches (the key extractor writes them
// there), batches are submitted back to back with at most depth in flight
// (copy-in, kernel and copy-out of consecutive batches overlap over the
// streams), and the results are read where they land. Each batch is filled
// once, from the traffic, and submitted again and again.
type Pipe struct {
	eng     gpu.Backend
	ID      gpu.TableID
	Batches []*gpu.Batch
	Depth   int
}

// maxPipeBatches bounds the batches a pipe allocates (small batches cycle
// through the traffic's first maxPipeBatches*batch keys).
const maxPipeBatches = 4096

// NewPipe allocates batches of batch keys for table id and fills batch i
// with fill(b, i); n is the traffic's size, depth the most batches in
// flight.
func NewPipe(eng gpu.Backend, id gpu.TableID, kind gpu.Kind, width, batch, n, depth int, fill func(b *gpu.Batch, i int)) (*Pipe, error) {
	nb := min(max((n+batch-1)/batch, depth, 1), maxPipeBatches)
	p := &Pipe{eng: eng, ID: id, Depth: min(depth, nb)}
	for i := 0; i < nb; i++ {
		b, err := eng.NewBatch(kind, width, batch)
		if err != nil {
			p.Free()
			return nil, fmt.Errorf("pinned batch %d of %d keys: %w", i, batch, err)
		}
		fill(b, i)
		p.Batches = append(p.Batches, b)
	}
	return p, nil
}

func (p *Pipe) Free() {
	for _, b := range p.Batches {
		b.Free()
	}
	p.Batches = nil
}

// Run submits the batches in turn, at most depth in flight, until at least
// total lookups were submitted (total > 0) or the deadline passed; between,
// if not nil, runs before each submit (an update's Apply). It returns the
// lookups completed, the time they took, and each batch's latency in µs
// (from its Submit to its Wait's return).
func (p *Pipe) Run(total int, deadline time.Time, between func() error) (n int, d time.Duration, lat []float64, err error) {
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
		if len(ring) == p.Depth {
			if err = retire(); err != nil {
				break
			}
		}
		if between != nil {
			if err = between(); err != nil {
				break
			}
		}
		b := p.Batches[k%len(p.Batches)]
		t0 := time.Now()
		if err = p.eng.Submit(p.ID, b); err != nil {
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

// PipeRounds warms the pipe up, then times rounds of at least total
// lookups each; it sets r's end-to-end rate (per second, median), its batch
// latencies and the depth.
func PipeRounds(p *Pipe, rounds, total int) (rate float64, lat []float64, err error) {
	if _, _, _, err = p.Run(len(p.Batches)*p.Batches[0].Cap, time.Time{}, nil); err != nil {
		return 0, nil, err
	}
	var rates []float64
	for range rounds {
		n, d, l, err := p.Run(total, time.Time{}, nil)
		if err != nil {
			return 0, nil, err
		}
		rates = append(rates, float64(n)/d.Seconds())
		lat = append(lat, l...)
	}
	return Median(rates), lat, nil
}

// NewAddrPipe is a pipe of pinned batches of batch addresses, IPv4 (v4)
// or IPv6 (v6, when v4 is nil), filled in order, wrapping around.
func NewAddrPipe(eng gpu.Backend, id gpu.TableID, v4 []uint32, v6 []lpm.Addr6, batch, depth int) (*Pipe, error) {
	kind, width, n := gpu.LPM4, 1, len(v4)
	if v4 == nil {
		kind, width, n = gpu.LPM6, 4, len(v6)
	}
	return NewPipe(eng, id, kind, width, batch, n, depth, func(b *gpu.Batch, i int) {
		for k := 0; k < batch; k++ {
			j := (i*batch + k) % n
			if v4 != nil {
				b.Keys[k] = v4[j]
			} else {
				b.Addrs6()[k] = v6[j]
			}
		}
		b.N = batch
	})
}

// Addr6 returns a as the lpm package's 128-bit address.
func Addr6(a netip.Addr) lpm.Addr6 {
	b := a.As16()
	var x lpm.Addr6
	for i := 0; i < 8; i++ {
		x.Hi = x.Hi<<8 | uint64(b[i])
		x.Lo = x.Lo<<8 | uint64(b[8+i])
	}
	return x
}

package pcapfile

import "io"

// Batches reads every packet and hands them to fn in file order, up to n
// at a time: the reading and parsing run on a goroutine of their own,
// one batch ahead of fn, which runs on the caller's goroutine (parse on
// one core, use on another). offset is the bytes of the file consumed
// after the batch (progress). A batch and its packets' Data are valid
// until fn returns; for a Reader of memory (Persistent) the packets
// alias the bytes themselves and Data stays valid until Close, with
// nothing copied; a stream's packets are copied into the batch's slab.
//
// Batches returns fn's first error (the reader stops), else the reader's
// error after the last whole packet, else nil at the end of the file.
// The Reader must not be used by others while Batches runs.
//
// Goroutines: the reader goroutine owns r until it sends its last batch;
// batches travel to the caller through full and back through free (two
// batches in flight: one filled while fn uses the other). The reader
// stops when done is closed.
func (r *Reader) Batches(n int, fn func(pkts []Packet, offset int64) error) error {
	if n < 1 {
		n = 1
	}
	type batch struct {
		pkts []Packet
		slab []byte
		off  int64
		err  error // the reader's error after these packets (not io.EOF)
		last bool
	}
	full := make(chan *batch, 1)
	free := make(chan *batch, 2)
	done := make(chan struct{})
	free <- &batch{pkts: make([]Packet, 0, n)}
	free <- &batch{pkts: make([]Packet, 0, n)}
	copyData := !r.Persistent()
	go func() {
		defer close(full)
		for {
			var b *batch
			select {
			case b = <-free:
			case <-done:
				return
			}
			b.pkts, b.slab = b.pkts[:0], b.slab[:0]
			for len(b.pkts) < n {
				p, err := r.Next()
				if err != nil {
					if err != io.EOF {
						b.err = err
					}
					b.last = true
					break
				}
				if copyData {
					off := len(b.slab)
					b.slab = append(b.slab, p.Data...)
					p.Data = b.slab[off:len(b.slab):len(b.slab)]
				}
				b.pkts = append(b.pkts, p)
			}
			if copyData {
				// The slab may have moved while growing: re-point the packets.
				off := 0
				for i := range b.pkts {
					k := len(b.pkts[i].Data)
					b.pkts[i].Data = b.slab[off : off+k : off+k]
					off += k
				}
			}
			b.off = r.off
			select {
			case full <- b:
			case <-done:
				return
			}
			if b.last {
				return
			}
		}
	}()
	defer func() {
		close(done)
		for range full { // wait for the reader to let go of r
		}
	}()
	for b := range full {
		if len(b.pkts) > 0 {
			if err := fn(b.pkts, b.off); err != nil {
				return err
			}
		}
		if b.err != nil {
			return b.err
		}
		if b.last {
			return nil
		}
		free <- b
	}
	return nil
}

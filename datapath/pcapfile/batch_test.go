package pcapfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// TestBatches: Batches hands over every packet in file order, from a
// stream (copied) and in place, stops at fn's error, and returns the
// reader's error after the packets before it.
func TestBatches(t *testing.T) {
	var pkts []Packet
	for i := range 1000 {
		d := make([]byte, 20+i%50)
		for j := range d {
			d[j] = byte(i + j)
		}
		pkts = append(pkts, Packet{Link: LinkEthernet, Timestamp: int64(i) * 1000, WireLen: uint32(len(d)), Data: d})
	}
	file := legacyPcap(binary.LittleEndian, false, LinkEthernet, pkts)
	_, want := readAll(t, file)
	for _, src := range []string{"stream", "inplace"} {
		for _, n := range []int{1, 7, 1000, 4096} {
			r := newFor(t, src, file)
			var got []Packet
			var lastOff int64
			err := r.Batches(n, func(ps []Packet, off int64) error {
				if len(ps) > n || off < lastOff {
					t.Fatalf("%s/%d: batch of %d, offset %d after %d", src, n, len(ps), off, lastOff)
				}
				lastOff = off
				for _, p := range ps {
					p.Data = append([]byte(nil), p.Data...)
					got = append(got, p)
				}
				return nil
			})
			if err != nil {
				t.Fatalf("%s/%d: %v", src, n, err)
			}
			identical(t, got, want)
			if lastOff != int64(len(file)) {
				t.Fatalf("%s/%d: last offset %d, file %d", src, n, lastOff, len(file))
			}
		}
		stop := errors.New("stop")
		calls := 0
		err := newFor(t, src, file).Batches(10, func([]Packet, int64) error { calls++; return stop })
		if err != stop || calls != 1 {
			t.Fatalf("%s: fn's error: %v after %d calls", src, err, calls)
		}
		seen := 0
		err = newFor(t, src, file[:len(file)-5]).Batches(64, func(ps []Packet, _ int64) error { seen += len(ps); return nil })
		if !errors.Is(err, ErrFormat) || seen != len(pkts)-1 {
			t.Fatalf("%s: truncated file: %v after %d packets", src, err, seen)
		}
	}
}

func newFor(t *testing.T, src string, b []byte) *Reader {
	t.Helper()
	var r *Reader
	var err error
	if src == "stream" {
		r, err = NewReader(bytes.NewReader(b))
	} else {
		r, err = NewReaderBytes(b)
	}
	if err != nil {
		t.Fatal(err)
	}
	return r
}

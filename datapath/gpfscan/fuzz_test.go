package gpfscan

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/gswitch/gswitch/datapath/pcapfile"
	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/filter"
)

// FuzzScanCapture: any bytes as a capture. The scan must not panic, and
// it must agree with pcapfile.Reader read sequentially: the same error or
// none, and without one the counts Evaluator.Eval gives (small batches,
// three workers: many chunks; pcapng interfaces of any link type go to
// the CPU; pcaps cut into open chunks the workers walk). Seeds in testdata/fuzz/FuzzScanCapture: a pcap and a pcapng
// of test packets, and truncated and corrupted copies.
func FuzzScanCapture(f *testing.F) {
	specs := []filter.Spec{{Name: "t", Expr: "tcp"}, {Name: "p", Expr: "udp port 53"}, {Name: "h", Expr: "host 10.0.0.1"},
		{Name: "l", Expr: "len > 100"}, {Name: "r", Expr: "portrange 50-60"}}
	prog, err := filter.Compile(specs, uint32(pcapfile.LinkEthernet), false, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// The sequential answer.
		want := make([]uint64, len(specs))
		var wantErr error
		rd, err := pcapfile.NewReader(bytes.NewReader(data))
		if err != nil {
			wantErr = err
		} else {
			evs := map[linkKey]*filter.Evaluator{}
			out := make([]uint64, 1)
			for {
				p, err := rd.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					wantErr = err
					break
				}
				k := linkKey{p.Link, p.BigEndian}
				ev := evs[k]
				if ev == nil {
					pg, err := filter.Compile(specs, uint32(p.Link), p.BigEndian, nil)
					if err != nil {
						wantErr = err
						break
					}
					ev = filter.NewEvaluator(pg)
					evs[k] = ev
				}
				ev.Eval(p.Data, p.WireLen, out)
				for i := range specs {
					want[i] += out[0] >> i & 1
				}
			}
		}
		// On batches (the CPU filter), and on the CPU alone.
		for _, pf := range []gpu.PacketFilter{gpu.NewCPUFilter(prog, 0), nil} {
			got := make([]uint64, len(specs))
			err = ScanCapture(data, ScanConfig{Filter: pf, Link: pcapfile.LinkEthernet, Program: prog,
				Workers: 3, Batch: 3, Batches: 4,
				Compile: func(l pcapfile.LinkType, big bool) (*filter.Program, error) {
					return filter.Compile(specs, uint32(l), big, nil)
				}}, func(p *ScanPiece) error {
				for i := range specs {
					got[i] += p.Counts[i]
				}
				return nil
			})
			if (err == nil) != (wantErr == nil) {
				t.Fatalf("scan (%v): %v; reader: %v", pf != nil, err, wantErr)
			}
			if wantErr != nil {
				if errors.Is(wantErr, pcapfile.ErrFormat) && !errors.Is(err, pcapfile.ErrFormat) {
					t.Fatalf("scan (%v): %v; reader: %v", pf != nil, err, wantErr)
				}
				continue
			}
			for i := range specs {
				if got[i] != want[i] {
					t.Fatalf("filter %s: scan (%v) %d, reader and Eval %d", specs[i].Expr, pf != nil, got[i], want[i])
				}
			}
		}
	})
}

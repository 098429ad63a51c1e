package filtercmd

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"

	"github.com/gswitch/gswitch/datapath/gpfscan"
	"github.com/gswitch/gswitch/datapath/pcapfile"
	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/filter"
)

// Both backends scan a capture the same way: it is mapped
// (gpfscan.MapCapture) and cut into chunks that --threads goroutines
// parse (gpfscan.ScanCapture); on the CPU each goroutine evaluates its
// packets where they lie in the mapping, on the GPU it reduces them into
// batches for the filter kernel. The calling goroutine adds up the
// counters in file order and, with --write, writes each packet to the
// files of the filters that matched it (ScanPiece.Matches), so that the
// answers do not depend on the number of goroutines. A file that cannot
// be mapped (not a regular file, or an empty one) or whose first packet
// cannot be read is streamed on the CPU instead (streamFile), which
// reports what is wrong with it.

// cpuChunk is the packets of a chunk on the CPU (0: gpfscan's default; the
// tests make it small, so that small captures have many chunks).
var cpuChunk = 0

// SetThreads sets the goroutines each capture is scanned on (0: one per
// CPU, GOMAXPROCS).
func (r *Runner) SetThreads(n int) { r.threads = n }

func (r *Runner) workers() int {
	if r.threads > 0 {
		return r.threads
	}
	return runtime.GOMAXPROCS(0)
}

// program returns the set compiled for a link type (safe during a scan:
// the workers compile for the link types they meet).
func (r *Runner) program(link pcapfile.LinkType, bigEndian bool) (*filter.Program, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, err := r.Compile(link, bigEndian); err != nil {
		return nil, err
	}
	return r.programs[linkKey{link, bigEndian}], nil
}

// scanFile scans one capture on r.workers() goroutines: on the CPU, or
// (r.gpu) on the device of the capture's first link type.
func (r *Runner) scanFile(path string) error {
	workers := r.workers()
	if st, err := os.Stat(path); err != nil || !st.Mode().IsRegular() {
		if r.gpu != nil && err != nil {
			return err
		}
		return r.streamFile(path) // (its error, if any)
	}
	data, unmap, err := gpfscan.MapCapture(path, workers)
	if err != nil || len(data) == 0 {
		if err == nil {
			unmap()
		}
		if r.gpu != nil && err != nil {
			return err
		}
		return r.streamFile(path)
	}
	defer unmap()
	link, big, err := firstLink(path)
	if errors.Is(err, io.EOF) { // a pcapng file without packets
		return nil
	}
	if err != nil {
		if r.gpu != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		return r.streamFile(path)
	}
	p, err := r.program(link, big)
	if err != nil {
		return err
	}
	cfg := gpfscan.ScanConfig{Link: link, BigEndian: big, Program: p, Compile: r.program, Workers: workers, Keep: r.writers != nil,
		Batch: cpuChunk}
	if r.gpu != nil {
		if cfg.Filter, err = r.device(p, link, big); err != nil {
			return err
		}
		snap, _ := gpu.FilterSnap(p.Layout(), 2048)
		cfg.Batch = max(1024, min(65536, (8<<20)/snap))
	}
	size := int64(len(data))
	err = gpfscan.ScanCapture(data, cfg, func(pc *gpfscan.ScanPiece) error {
		for f := range r.counts {
			r.counts[f].Packets += pc.Counts[f]
			r.counts[f].Bytes += pc.Bytes[f]
		}
		r.packets += uint64(pc.N)
		if r.writers != nil {
			for i, pk := range pc.Packets {
				if err := pc.Matches(i, func(f int) error { return r.writers[f].WritePacket(pk) }); err != nil {
					return err
				}
			}
		}
		if r.progress != nil {
			r.progress(pc.Offset, size, r.packets)
		}
		return nil
	})
	if errors.Is(err, pcapfile.ErrFormat) {
		return fmt.Errorf("%s: %w", path, err)
	}
	return err
}

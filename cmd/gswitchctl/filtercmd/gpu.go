package filtercmd

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/gswitch/gswitch/datapath/gpfscan"
	"github.com/gswitch/gswitch/datapath/pcapfile"
	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/filter"
)

// The GPU backend: each capture is mapped (gpfscan.MapCapture), cut into
// chunks parsed on every CPU into batches of reduced packets
// (gpfscan.ScanCapture), and the batches are evaluated by the filter kernel
// over several CUDA streams; this goroutine adds up the counters in file
// order and, with --write, writes each packet to the files of the filters
// its bitmap names. Packets of a link type other than the capture's first
// (pcapng) and packets longer than the rows of a set that needs whole
// packets are evaluated on the CPU by the parsing goroutines.

// gpuRunner is the device side of a Runner.
type gpuRunner struct {
	g    gpu.FilterGPU
	devs map[linkKey]gpu.FilterDevice
	mu   sync.Mutex // guards Runner.progs and Runner.programs during a scan (workers compile)
}

// openFilterGPU opens the device (a seam for the CPU build's test of the
// host side).
var openFilterGPU = gpu.OpenFilterGPU

// gpuStreams is the number of CUDA streams batches are spread over.
const gpuStreams = 4

// OpenGPU makes r evaluate on the GPU (device 0); the error is
// gpu.ErrNoCUDA in a build without CUDA, or why the device did not open.
func (r *Runner) OpenGPU() error {
	g, err := openFilterGPU()
	if err != nil {
		return err
	}
	r.gpu = &gpuRunner{g: g, devs: map[linkKey]gpu.FilterDevice{}}
	return nil
}

// Device names the GPU ("" on the CPU).
func (r *Runner) Device() string {
	if r.gpu == nil {
		return ""
	}
	return r.gpu.g.Device()
}

func (r *Runner) closeGPU() {
	if r.gpu == nil {
		return
	}
	for _, d := range r.gpu.devs {
		d.Close()
	}
	r.gpu.g.Close()
	r.gpu = nil
}

// program returns the set compiled for a link type (safe during a scan).
func (r *Runner) program(link pcapfile.LinkType, bigEndian bool) (*filter.Program, error) {
	r.gpu.mu.Lock()
	defer r.gpu.mu.Unlock()
	if _, err := r.Compile(link, bigEndian); err != nil {
		return nil, err
	}
	return r.programs[linkKey{link, bigEndian}], nil
}

// gpuFile runs one capture through the GPU.
func (r *Runner) gpuFile(path string) error {
	link, big, err := firstLink(path)
	if errors.Is(err, io.EOF) { // a pcapng file without packets
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	p, err := r.program(link, big)
	if err != nil {
		return err
	}
	k := linkKey{link, big}
	dev := r.gpu.devs[k]
	if dev == nil {
		if dev, err = r.gpu.g.Filter(p, gpuStreams, 0); err != nil {
			return err
		}
		r.gpu.devs[k] = dev
	}
	workers := runtime.GOMAXPROCS(0)
	data, unmap, err := gpfscan.MapCapture(path, workers)
	if err != nil {
		return err
	}
	defer unmap()
	snap, _ := gpu.FilterSnap(p.Layout(), 2048)
	batch := max(1024, min(65536, (8<<20)/snap))
	cfg := gpfscan.ScanConfig{Filter: dev, Link: link, BigEndian: big, Program: p, Compile: r.program, Workers: workers,
		Batch: batch, Keep: r.writers != nil}
	size := int64(len(data))
	return gpfscan.ScanCapture(data, cfg, func(pc *gpfscan.ScanPiece) error {
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
}

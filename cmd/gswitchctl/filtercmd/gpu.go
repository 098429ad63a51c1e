package filtercmd

import (
	"github.com/gswitch/gswitch/datapath/pcapfile"
	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/filter"
)

// The GPU backend: each capture is scanned as on the CPU (scan.go), its
// chunks parsed into batches of reduced packets, which the filter kernel
// evaluates over several CUDA streams. Packets of a link type other than
// the capture's first (pcapng) and packets longer than the rows of a set
// that needs whole packets are evaluated on the CPU by the parsing
// goroutines.

// gpuRunner is the device side of a Runner.
type gpuRunner struct {
	g    gpu.FilterGPU
	devs map[linkKey]gpu.FilterDevice
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

// device returns the device filter of the set compiled for a link type
// (opened at its first capture).
func (r *Runner) device(p *filter.Program, link pcapfile.LinkType, big bool) (gpu.FilterDevice, error) {
	k := linkKey{link, big}
	dev := r.gpu.devs[k]
	if dev == nil {
		var err error
		if dev, err = r.gpu.g.Filter(p, gpuStreams, 0); err != nil {
			return nil, err
		}
		r.gpu.devs[k] = dev
	}
	return dev, nil
}

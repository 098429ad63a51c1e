//go:build cuda

package gpu

import "github.com/gswitch/gswitch/tables/filter"

// FilterGPUBuilt says whether OpenFilterGPU can open a device in this
// build.
const FilterGPUBuilt = true

// OpenFilterGPU starts the CUDA backend on device 0 for filtering.
func OpenFilterGPU() (FilterGPU, error) {
	c, err := NewCUDA(0)
	if err != nil {
		return nil, err
	}
	return &cudaFilterGPU{c: c}, nil
}

type cudaFilterGPU struct{ c *CUDA }

func (g *cudaFilterGPU) Filter(p *filter.Program, streams, maxRow int) (FilterDevice, error) {
	return g.c.PacketFilter(p, streams, maxRow)
}

func (g *cudaFilterGPU) Device() string { return g.c.Device() }

func (g *cudaFilterGPU) Close() error { return g.c.Close() }

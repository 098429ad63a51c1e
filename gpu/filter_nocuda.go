//go:build !cuda

package gpu

// FilterGPUBuilt says whether OpenFilterGPU can open a device in this
// build (false: it returns ErrNoCUDA at once).
const FilterGPUBuilt = false

// OpenFilterGPU returns ErrNoCUDA: this build has no CUDA backend.
func OpenFilterGPU() (FilterGPU, error) { return nil, ErrNoCUDA }

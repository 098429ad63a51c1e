//go:build !cuda

package gpu

// OpenCUDA returns ErrNoCUDA: this build has no CUDA backend.
func OpenCUDA(ordinals []int) ([]Backend, error) { return nil, ErrNoCUDA }

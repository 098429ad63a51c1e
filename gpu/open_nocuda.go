//go:build !cuda

package gpu

// OpenCUDA returns ErrNoCUDA: this build has no CUDA backend.
func OpenCUDA(ordinals []int) ([]Backend, error) { return nil, ErrNoCUDA }

// OpenCUDAConfig returns ErrNoCUDA: this build has no CUDA backend.
func OpenCUDAConfig(ordinals []int, rc ResidentConfig) ([]Backend, error) { return nil, ErrNoCUDA }

package benchutil

import (
	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/lpm"
)

// GPUEngine is what bench needs of a GPU backend: the Backend, a pipeline
// over streams and kernel-only timings (gpu.Engine over CUDA devices).
type GPUEngine interface {
	gpu.Backend
	SetStreams(n, chunk int) error
	KernelTimeLPM4(id gpu.TableID, addrs []uint32, iters int) (float64, error)
	KernelTimeLPM6(id gpu.TableID, addrs []lpm.Addr6, iters int) (float64, error)
	KernelTimeFlow(id gpu.TableID, soa []uint32, n, iters int) (float64, error)
}

// NewGPUEngine starts the GPU engine on the devices of ordinals, batches
// below minBatch going to the CPU; nil in a build without CUDA (the cuda
// build tag sets it, gpu_cuda.go).
var NewGPUEngine func(ordinals []int, minBatch int) (GPUEngine, error)

//go:build cuda

package benchutil

import "github.com/gswitch/gswitch/gpu"

func init() {
	NewGPUEngine = func(ordinals []int, minBatch int) (GPUEngine, error) {
		// Every named device must open: a benchmark does not fall back.
		return gpu.Open("gpu", ordinals, minBatch, nil)
	}
}

//go:build cuda

package main

import "github.com/gswitch/gswitch/gpu"

func init() {
	newGPUEngine = func(ordinals []int, minBatch int) (gpuEngine, error) {
		// Every named device must open: a benchmark does not fall back.
		return gpu.Open("gpu", ordinals, minBatch, nil)
	}
}

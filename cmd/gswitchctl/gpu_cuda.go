//go:build cuda

package main

import "github.com/gswitch/gswitch/gpu"

func init() {
	newGPUEngine = func() (gpuEngine, error) {
		c, err := gpu.NewCUDA(0)
		if err != nil {
			return nil, err
		}
		return c, nil
	}
}

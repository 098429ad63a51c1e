//go:build cuda

package gpu

import (
	"errors"
	"fmt"
)

// OpenCUDA starts a CUDA backend on each device ordinal. It returns those
// that started and, joined, the errors of those that did not.
func OpenCUDA(ordinals []int) ([]Backend, error) { return OpenCUDAConfig(ordinals, ResidentConfig{}) }

// OpenCUDAConfig is OpenCUDA with each backend's resident lookups as rc says.
func OpenCUDAConfig(ordinals []int, rc ResidentConfig) ([]Backend, error) {
	var devs []Backend
	var errs []error
	seen := map[int]bool{}
	for _, o := range ordinals {
		if seen[o] {
			errs = append(errs, fmt.Errorf("gpu: device %d named twice", o))
			continue
		}
		seen[o] = true
		c, err := NewCUDAConfig(o, rc)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		devs = append(devs, c)
	}
	return devs, errors.Join(errs...)
}

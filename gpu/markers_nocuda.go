//go:build !cuda

package gpu

import (
	"fmt"

	"github.com/gswitch/gswitch/tables/rabin"
)

// OpenMarkers returns the Markers of backend "cpu" (or "auto", which is the
// CPU in a build without CUDA); "gpu" is ErrNoMarkersGPU here.
func OpenMarkers(backend string, m *rabin.Marker) (Markers, error) {
	switch backend {
	case "cpu", "auto":
		return CPUMarkers{m}, nil
	case "gpu":
		return nil, ErrNoMarkersGPU
	}
	return nil, fmt.Errorf("gpu: markers backend %q: want auto, cpu or gpu", backend)
}

// deviceMarkers is ErrNoMarkersGPU in a build without CUDA.
func deviceMarkers(Backend, *rabin.Marker) (Markers, error) { return nil, ErrNoMarkersGPU }

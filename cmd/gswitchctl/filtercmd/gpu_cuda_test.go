//go:build cuda

package filtercmd

import (
	"testing"

	"github.com/gswitch/gswitch/gpu"
)

// TestCUDAFilterCommandEqualsCPU: --backend gpu on the device gives the
// CPU backend's output and files (compareBackends).
func TestCUDAFilterCommandEqualsCPU(t *testing.T) {
	g, err := gpu.OpenFilterGPU()
	if err != nil {
		t.Fatalf("no CUDA device: %v", err)
	}
	t.Logf("device %s", g.Device())
	g.Close()
	compareBackends(t)
}

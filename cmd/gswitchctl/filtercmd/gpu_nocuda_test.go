//go:build !cuda

package filtercmd

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/filter"
)

// TestGPUBackendWithoutCUDA: --backend gpu in a build without CUDA is a
// one-line error that says how to get one.
func TestGPUBackendWithoutCUDA(t *testing.T) {
	path := writeCapture(t, t.TempDir())
	var out, errb bytes.Buffer
	err := Run([]string{"--backend", "gpu", "-e", "web: tcp port 80", path}, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "-tags cuda") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("--backend gpu without CUDA: %v", err)
	}
	if out.Len() != 0 {
		t.Fatalf("output before the error: %q", out.String())
	}
}

// cpuFilterGPU stands in for the device: CPUFilter behind the FilterGPU
// interface, so that the GPU backend's host side runs in this build.
type cpuFilterGPU struct{}

type cpuFilterDevice struct{ *gpu.CPUFilter }

func (cpuFilterGPU) Filter(p *filter.Program, streams, maxRow int) (gpu.FilterDevice, error) {
	return cpuFilterDevice{gpu.NewCPUFilter(p, maxRow)}, nil
}
func (cpuFilterGPU) Device() string { return "cpu stand-in" }
func (cpuFilterGPU) Close() error   { return nil }

func (cpuFilterDevice) Describe() string                                  { return "cpu" }
func (cpuFilterDevice) KernelTime(*gpu.PacketBatch, int) (float64, error) { return 0, nil }

// TestGPUBackendHostSide: the GPU backend's host side (mapping, parallel
// parsing, batches, CPU fallbacks, writing in file order) over the CPU
// stand-in gives the CPU backend's output and files.
func TestGPUBackendHostSide(t *testing.T) {
	openFilterGPU = func() (gpu.FilterGPU, error) { return cpuFilterGPU{}, nil }
	defer func() { openFilterGPU = gpu.OpenFilterGPU }()
	compareBackends(t)
}

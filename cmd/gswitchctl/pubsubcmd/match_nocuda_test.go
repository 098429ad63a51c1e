//go:build !cuda

package pubsubcmd

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/bubble"
	"github.com/gswitch/gswitch/tables/pubsub"
)

// TestGPUBackendWithoutCUDA: match --backend gpu in a build without CUDA
// is a one-line error (not a usage error) that says how to get one, given
// before any file is read and with no output.
func TestGPUBackendWithoutCUDA(t *testing.T) {
	subs := write(t, "s.txt", "1: x = 1\n")
	evs := write(t, "e.jsonl", "{\"x\": 1}\n")
	for _, files := range [][]string{{subs, evs}, {"/nonexistent/s.txt", "/nonexistent/e.jsonl"}} {
		var out, errb bytes.Buffer
		err := Run([]string{"match", "--subs", files[0], "--events", files[1], "--backend", "gpu"}, &out, &errb)
		if err == nil || errors.Is(err, ErrUsage) || err.Error() != "--backend gpu needs a gswitchctl built with -tags cuda and a CUDA device" {
			t.Fatalf("--backend gpu without CUDA (%s): %v", files[0], err)
		}
		if out.Len() != 0 {
			t.Fatalf("output before the error: %q", out.String())
		}
	}
}

// TestGPUBackendHostSide: the GPU backend's host side (the table's device
// layout, the device opened with it, batches in order) over
// gpu.LayoutDevice, the kernel's computation in Go, gives the CPU
// backend's output byte for byte (compareBackends).
func TestGPUBackendHostSide(t *testing.T) {
	opened := 0
	gpuBackend = func() (func(*pubsub.Layout) (gpu.EventDevice, error), error) {
		return func(l *pubsub.Layout) (gpu.EventDevice, error) {
			d := &gpu.LayoutDevice{}
			if err := d.Update(bubble.Update{Full: l.Image.Clone()}, l.Names); err != nil {
				return nil, err
			}
			opened++
			return d, nil
		}, nil
	}
	defer func() { gpuBackend = gpuOpener }()
	compareBackends(t)
	if opened == 0 {
		t.Fatal("the device stand-in was never opened")
	}
	gpuBackend = func() (func(*pubsub.Layout) (gpu.EventDevice, error), error) {
		return func(*pubsub.Layout) (gpu.EventDevice, error) { return nil, errors.New("no device here") }, nil
	}
	subs := write(t, "s.txt", "1: x = 1\n")
	evs := write(t, "e.jsonl", "{\"x\": 1}\n")
	if _, err := run(t, "match", "--subs", subs, "--events", evs, "--backend", "gpu"); err == nil || !strings.Contains(err.Error(), "--backend gpu: no device here") {
		t.Fatalf("device that does not open: %v", err)
	}
}

//go:build cuda

package pubsubcmd

import (
	"testing"

	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/pubsub"
)

// TestCUDAMatchEqualsCPU: match --backend gpu on the device (the CUDA
// matcher, batches of every size and the small-batch path) prints
// --backend cpu's output byte for byte (compareBackends).
func TestCUDAMatchEqualsCPU(t *testing.T) {
	tab := pubsub.New()
	specs, err := pubsub.Parse("1: x = 1\n")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tab.AddSpecs(specs); err != nil {
		t.Fatal(err)
	}
	dev, err := gpu.OpenEventDevice(pubsub.NewDevice(tab).Layout())
	if err != nil {
		t.Skipf("SKIPPED: no usable CUDA device, pubsub match --backend gpu is not tested: %v", err)
	}
	t.Logf("device: %s", dev.Describe())
	dev.Close()
	compareBackends(t)
}

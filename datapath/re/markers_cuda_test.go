//go:build cuda

package re

import (
	"slices"
	"testing"

	"github.com/gswitch/gswitch/gpu"
)

// TestCUDAMarkersEncoder: the encoder with its markers computed on the GPU
// (DeviceMarkers over the CUDA kernel rabin_markers, as the agent wires it)
// puts exactly the frames on the wire that the CPU's encoder does, on
// batches of real payloads (source text sent twice with other segment
// boundaries, zeros, odd lengths); and the GPU's marker positions of every
// payload equal rabin.Marker.Markers'.
func TestCUDAMarkersEncoder(t *testing.T) {
	m, err := Config{}.Marker()
	if err != nil {
		t.Fatal(err)
	}
	mk, err := gpu.OpenMarkers("gpu", m)
	if err != nil {
		t.Skipf("SKIPPED: no usable CUDA device, the GPU markers are not tested: %v", err)
	}
	defer mk.Close()
	dm, err := NewDeviceMarkers(mk, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer dm.Close()
	frames := realFrames(t, 4<<20)
	var payloads [][]byte
	for _, f := range frames {
		if s, ok := parseTCP(f); ok {
			payloads = append(payloads, f[s.pay:s.end])
		}
	}
	pos := make([][]int32, len(payloads))
	if err := dm.Markers(payloads, pos); err != nil {
		t.Fatal(err)
	}
	total := 0
	for k, p := range payloads {
		want := m.Markers(nil, p)
		if !slices.Equal(pos[k], want) && len(pos[k])+len(want) > 0 {
			t.Fatalf("payload %d (%d bytes): GPU markers %v, CPU %v", k, len(p), pos[k], want)
		}
		total += len(want)
	}
	t.Logf("%d payloads, %d markers: GPU equal to CPU", len(payloads), total)
	cpu, dev, dc, dd := twinEncoders(t, dm, 32)
	sameEncoding(t, frames, 256, cpu, dev, dc, dd)
	if dev.Stats.OffloadBatches.Load() == 0 || dev.Stats.OffloadFailures.Load() != 0 || dm.Err() != nil {
		t.Fatalf("%d batches on the GPU, %d failed (%v)", dev.Stats.OffloadBatches.Load(), dev.Stats.OffloadFailures.Load(), dm.Err())
	}
	t.Logf("%d frames, %d encoded, %d batches' markers on the GPU (%s): wire identical to the CPU's", len(frames),
		dev.Stats.Encoded.Load(), dev.Stats.OffloadBatches.Load(), dm.Name())
}

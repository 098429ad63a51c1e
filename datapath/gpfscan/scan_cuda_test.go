//go:build cuda

package gpfscan

import (
	"testing"

	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/filter"
)

// TestCUDAFilterScan: ScanCapture over the CUDA filter equals the
// sequential CPU answer on every test capture, as pcap and as pcapng, a
// pcapng of two link types and whole packets in short rows (testScan).
func TestCUDAFilterScan(t *testing.T) {
	c, err := gpu.NewCUDA(0)
	if err != nil {
		t.Skipf("SKIPPED: no usable CUDA device, the GPU scan is not tested: %v", err)
	}
	t.Logf("device: %s", c.Device())
	defer c.Close()
	testScan(t, func(p *filter.Program, maxRow int) gpu.PacketFilter {
		f, err := c.PacketFilter(p, 3, maxRow)
		if err != nil {
			t.Fatal(err)
		}
		return f
	})
}

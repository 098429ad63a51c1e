package gpu

import (
	"net/netip"
	"os"
	"sync"
	"testing"

	"github.com/gswitch/gswitch/internal/shareddata"
	"github.com/gswitch/gswitch/tables/lpm"
)

func TestCPURandom(t *testing.T) {
	b := NewCPU()
	defer b.Close()
	testRandomLPM(t, b, lpm.IPv4, 20000, 20000, 100)
	testRandomLPM(t, b, lpm.IPv6, 10000, 10000, 50)
}

func TestCPUMixedUpdateSizes(t *testing.T) {
	b := NewCPU()
	defer b.Close()
	testMixedUpdateSizes(t, b, lpm.IPv4)
	testMixedUpdateSizes(t, b, lpm.IPv6)
}

func TestCPURejects(t *testing.T) {
	b := NewCPU()
	defer b.Close()
	testRejects(t, b)
}

var realBGP struct {
	once   sync.Once
	v4, v6 []netip.Prefix
	err    error
}

// loadBGP reads the real BGP table once per process from path.
func loadBGP(t *testing.T, path string) (v4, v6 []netip.Prefix) {
	realBGP.once.Do(func() {
		var all []netip.Prefix
		all, realBGP.err = lpm.OpenPrefixFile(path)
		realBGP.v4, realBGP.v6 = lpm.SplitFamilies(all)
	})
	if realBGP.err != nil {
		t.Fatalf("real BGP table %s: %v", path, realBGP.err)
	}
	return realBGP.v4, realBGP.v6
}

// bgpPath is the real BGP table: $GSWITCH_BGP when set (the device machine
// gets a copy carried in .cuda/data), else ../shared/data.
func bgpPath(t *testing.T) string {
	if p := os.Getenv("GSWITCH_BGP"); p != "" {
		return p
	}
	return shareddata.Path(t, "fib/bgp-full-table.txt.gz")
}

func TestCPURealBGP(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the real BGP table is skipped")
	}
	v4, v6 := loadBGP(t, bgpPath(t))
	b := NewCPU()
	defer b.Close()
	testRealLPM(t, b, lpm.IPv4, v4, 20000, 10, 1<<18)
	testRealLPM(t, b, lpm.IPv6, v6, 5000, 5, 1<<17)
}

func TestCPUFlowRandom(t *testing.T) {
	b := NewCPU()
	defer b.Close()
	testRandomFlowAll(t, b, false)
}

func TestCPUFlowACL1(t *testing.T) {
	b := NewCPU()
	defer b.Close()
	testACL1Flow(t, b, false)
}

func TestCPUFlowRejects(t *testing.T) {
	b := NewCPU()
	defer b.Close()
	testFlowRejects(t, b)
}

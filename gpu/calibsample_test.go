package gpu

import (
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/gswitch/gswitch/tables/lpm"
)

// randomRoutes4 returns n IPv4 routes of lengths 8..32 with next hops
// 1..n, from a fixed seed.
func randomRoutes4(n int) []lpm.Route {
	rng := rand.New(rand.NewPCG(1, 2))
	out := make([]lpm.Route, 0, n)
	seen := map[netip.Prefix]bool{}
	for len(out) < n {
		bits := 8 + rng.IntN(25)
		a := rng.Uint32()
		p, _ := netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)}).Prefix(bits)
		if seen[p] {
			continue
		}
		seen[p] = true
		out = append(out, lpm.Route{Prefix: p, NextHop: uint32(len(out) + 1)})
	}
	return out
}

// TestLPMSample: the calibration's addresses of an LPM table reach its
// routes (they were drawn through entries holding one), in both families,
// and count the levels the trie uses.
func TestLPMSample(t *testing.T) {
	tab4, err := lpm.Build(lpm.IPv4, randomRoutes4(5000), lpm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tab6, err := lpm.New(lpm.IPv6, lpm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for k := range 300 {
		p := netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, byte(k >> 8), byte(k), 0, 0, 0, 0, 0, 0, byte(k), 0, 0, 0}), 104)
		if err := tab6.Insert(p, uint32(k+1)); err != nil {
			t.Fatal(err)
		}
	}
	c := NewCPU()
	defer c.Close()
	if err := c.Load(1, LPM4, tab4.Mirror().Sync().Full); err != nil {
		t.Fatal(err)
	}
	if err := c.Load(2, LPM6, tab6.Mirror().Sync().Full); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id   TableID
		kind Kind
	}{{1, LPM4}, {2, LPM6}} {
		s, err := c.sample(tc.id, tc.kind, 512)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.lookup(c, tc.id); err != nil {
			t.Fatal(err)
		}
		hits := 0
		for _, nh := range s.outL[:s.n] {
			if nh != 0 {
				hits++
			}
		}
		// Every address was walked through entries holding a route or a
		// pointer down to a leaf of one; a leaf of an inner prefix is
		// still a hit.
		if s.n != 512 || hits < s.n*9/10 || s.classes < 2 {
			t.Errorf("%v: %d keys, %d hit a route, %d levels", tc.kind, s.n, hits, s.classes)
		}
	}
	// An empty table: no levels with a route.
	empty, _ := lpm.New(lpm.IPv4, lpm.Options{})
	if err := c.Load(3, LPM4, empty.Mirror().Sync().Full); err != nil {
		t.Fatal(err)
	}
	if s, err := c.sample(3, LPM4, 16); err != nil || s.classes != 0 || s.n != 16 {
		t.Errorf("empty table: %+v, %v", s, err)
	}
}

// TestEngineAutoLPM: LPM tables are calibrated as flow tables are, at
// AutoConfig.LPMBatch: a device priced far below the CPU takes an LPM
// table, one priced far above leaves it on the CPU; an empty table stays on
// the CPU until routes come, then moves; a LPMBatch below MinBatch keeps it
// on the CPU whatever the prices.
func TestEngineAutoLPM(t *testing.T) {
	routes := randomRoutes4(3000)
	for _, tc := range []struct {
		name     string
		devNs    float64
		lpmBatch int
		want     string
		why      string
	}{
		{"cheap device", 0.001, 256, "device", "the device is cheaper"},
		{"dear device", 1e6, 256, "cpu", "the CPU is cheaper"},
		{"batches below min-batch", 0.001, 32, "cpu", "below --min-batch 64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := NewEngine(EngineConfig{Devices: []Backend{NewCPU()}, MinBatch: 64, Mode: ModeAuto,
				Auto: AutoConfig{Delay: time.Millisecond, Batch: 4096, LPMBatch: tc.lpmBatch, HostNsPerKey: -1, FixedDeviceNsPerKey: tc.devNs}})
			defer e.Close()
			tab, err := lpm.New(lpm.IPv4, lpm.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if err := e.Load(7, LPM4, tab.Mirror().Sync().Full); err != nil {
				t.Fatal(err)
			}
			waitCalibrated(t, e, 7)
			if tb := backendOf(t, e, 7); tb.Backend != "cpu" || !strings.Contains(tb.Reason, "empty table") || tb.Kind != "lpm4" {
				t.Fatalf("empty LPM table: %+v", tb)
			}
			for _, r := range routes {
				if err := tab.Insert(r.Prefix, r.NextHop); err != nil {
					t.Fatal(err)
				}
			}
			if err := e.Apply(7, tab.Mirror().Sync()); err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(20 * time.Second); backendOf(t, e, 7).Calibrations < 2; time.Sleep(2 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("no calibration after the routes came: %+v", backendOf(t, e, 7))
				}
			}
			tb := backendOf(t, e, 7)
			if tb.Backend != tc.want || !strings.Contains(tb.Reason, tc.why) || tb.Classes < 2 || tb.CPUNsPerKey <= 0 || tb.Batch != tc.lpmBatch {
				t.Fatalf("%d routes: %+v; want %s (%s)", len(routes), tb, tc.want, tc.why)
			}
			// The lookups go where the placement says (1000 keys >= MinBatch).
			before := e.Stats()
			if err := e.LookupLPM4(7, make([]uint32, 1000), make([]uint32, 1000)); err != nil {
				t.Fatal(err)
			}
			after := e.Stats()
			onDev := after.KeysOnDevice - before.KeysOnDevice
			if (tc.want == "device") != (onDev == 1000) {
				t.Errorf("placed on %s, %d of 1000 keys on the device", tc.want, onDev)
			}
		})
	}
}

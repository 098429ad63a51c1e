//go:build cuda

package gpu

import (
	"bytes"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"

	"gorgonia.org/cu"

	"github.com/gswitch/gswitch/tables/flow"
	"github.com/gswitch/gswitch/tables/lpm"
)

// injectFault launches gswitch_fault on c: a real device fault (a trap),
// after which every call of c's context fails.
func injectFault(t *testing.T, c *CUDA) {
	t.Helper()
	err := c.do(func() error {
		fn, err := c.mod.Function("gswitch_fault")
		if err != nil {
			return err
		}
		if err := fn.Launch(1, 1, 1, 1, 1, 1, 0, c.streams[0], nil); err != nil {
			return err
		}
		return cu.Synchronize()
	})
	if err == nil {
		t.Fatal("the trap kernel did not fail the context")
	}
	t.Logf("injected device fault: %v", err)
}

func engineLog() (*slog.Logger, *bytes.Buffer) {
	var b bytes.Buffer
	return slog.New(slog.NewTextHandler(&b, nil)), &b
}

// TestCUDAEngineFault: the device serves, then fails mid-run (a trap); the
// lookups, batches included, go on with the same answers on the CPU, the
// failure is logged once and the metrics show the device down.
//
// A trapped context stays broken for the whole process (a new context on
// the device fails too), so the test runs in a child process of its own.
func TestCUDAEngineFault(t *testing.T) {
	if os.Getenv("GSWITCH_FAULT_CHILD") != "1" {
		runChild(t, "TestCUDAEngineFault", "GSWITCH_FAULT_CHILD=1")
		return
	}
	c, err := NewCUDA(0)
	if err != nil {
		t.Skipf("SKIPPED: no usable CUDA device, the GPU backend is not tested: %v", err)
	}
	defer c.Close() // fails: the context is gone, as it should be
	log, logs := engineLog()
	e := NewEngine(EngineConfig{Devices: []Backend{c}, MinBatch: 1, Logger: log})
	testRandomLPM(t, e, lpm.IPv4, 5000, 5000, 10)
	if s := e.Stats(); !s.Devices[0].Up || s.Devices[0].Keys == 0 {
		t.Fatalf("before the fault: %+v: want the device up and serving", s)
	}
	injectFault(t, c)
	testRandomLPM(t, e, lpm.IPv4, 5000, 5000, 10)
	testRandomLPM(t, e, lpm.IPv6, 3000, 3000, 5)
	testRandomFlowAll(t, e, false)
	s := e.Stats()
	if s.Devices[0].Up {
		t.Fatalf("after the fault: %+v: want the device down", s)
	}
	if n := strings.Count(logs.String(), "device failed"); n != 1 {
		t.Fatalf("%d log lines of the failure, want 1:\n%s", n, logs)
	}
	var m bytes.Buffer
	e.WriteMetrics(&m)
	if !strings.Contains(m.String(), `gswitch_backend_device_up{device="0",name="cuda"} 0`) {
		t.Fatalf("metrics do not show the device down:\n%s", m.String())
	}
	t.Logf("after the fault: %d fallbacks; log: %s", s.Fallbacks, strings.TrimSpace(logs.String()))
}

// TestCUDAEngineOutOfMemory: with the device's memory taken (real
// allocations), loading a big table fails on the device; the Engine serves
// it from the CPU with the same answers.
func TestCUDAEngineOutOfMemory(t *testing.T) {
	c := newTestCUDA(t)
	var hog []cu.DevicePtr
	c.do(func() error {
		for _, size := range []int64{1 << 30, 1 << 26, 1 << 22} {
			for {
				p, err := cu.MemAlloc(size)
				if err != nil {
					break
				}
				hog = append(hog, p)
			}
		}
		return nil
	})
	t.Cleanup(func() {
		c.do(func() error {
			for _, p := range hog {
				cu.MemFree(p)
			}
			return nil
		})
	})
	t.Logf("took %d allocations of device memory", len(hog))
	log, logs := engineLog()
	e := NewEngine(EngineConfig{Devices: []Backend{c}, MinBatch: 1, Logger: log})
	testRandomLPM(t, e, lpm.IPv6, 20000, 5000, 5)
	s := e.Stats()
	if s.Devices[0].Up || s.KeysOnCPU == 0 {
		t.Fatalf("%+v: want the device out of service and the CPU serving", s)
	}
	if !strings.Contains(logs.String(), "OutOfMemory") {
		t.Fatalf("the log does not say the device ran out of memory:\n%s", logs)
	}
	t.Logf("log: %s", strings.TrimSpace(logs.String()))
}

// TestCUDANoDevice runs this test binary again with no GPU visible
// (CUDA_VISIBLE_DEVICES=""): the driver's cuInit fails there, which
// gorgonia.org/cu would answer by exiting the process; the child must
// instead see NewCUDA fail with a clear error and Open("auto") serve on
// the CPU.
func TestCUDANoDevice(t *testing.T) {
	if os.Getenv("GSWITCH_NODEVICE_CHILD") == "1" {
		_, err := NewCUDA(0)
		if err == nil {
			t.Fatal("NewCUDA succeeded with no device visible")
		}
		t.Logf("NewCUDA: %v", err)
		log, logs := engineLog()
		e, err := Open("auto", nil, 0, log)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		testRandomLPM(t, e, lpm.IPv4, 2000, 2000, 5)
		if !strings.Contains(logs.String(), "no usable GPU") {
			t.Fatalf("no log line of the fall-back: %q", logs)
		}
		if _, err := Open("gpu", nil, 0, log); err == nil {
			t.Fatal(`Open("gpu") succeeded with no device`)
		}
		return
	}
	out := runChild(t, "TestCUDANoDevice", "GSWITCH_NODEVICE_CHILD=1", "CUDA_VISIBLE_DEVICES=")
	if !strings.Contains(out, "NewCUDA: gpu: cuda: the driver did not initialise") {
		t.Fatal("the child did not report the driver's failure")
	}
}

// TestCUDAMultiGPU replicates tables on two devices and spreads the
// lookups over both; it needs a machine with two GPUs.
func TestCUDAMultiGPU(t *testing.T) {
	n, err := cu.NumDevices()
	if err != nil || n < 2 {
		t.Skipf("SKIPPED: %d CUDA device(s) (%v): the two-GPU test needs two", n, err)
	}
	devs, err := OpenCUDA([]int{0, 1})
	if err != nil {
		t.Fatal(err)
	}
	e := NewEngine(EngineConfig{Devices: devs, MinBatch: 1})
	defer e.Close()
	for _, d := range devs {
		t.Logf("device: %s", d.Device())
	}
	testRandomLPM(t, e, lpm.IPv4, 20000, 20000, 20)
	testRandomLPM(t, e, lpm.IPv6, 10000, 10000, 10)
	testRandomFlowAll(t, e, false)
	testACL1Flow(t, e, false)
	s := e.Stats()
	if s.Devices[0].Keys == 0 || s.Devices[1].Keys == 0 || s.Fallbacks != 0 {
		t.Fatalf("%+v: want keys on both devices and no fallback", s)
	}
	t.Logf("keys: device 0 %d, device 1 %d", s.Devices[0].Keys, s.Devices[1].Keys)
}

// runChild runs test name of this binary in a child process with env added
// and fails if the child fails; it returns the child's output.
func runChild(t *testing.T, name string, env ...string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+name+"$", "-test.v")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	t.Logf("child (%v):\n%s", env, out)
	if err != nil {
		t.Fatalf("child %s: %v", name, err)
	}
	if !strings.Contains(string(out), "--- PASS: "+name) {
		t.Fatalf("child %s did not pass", name)
	}
	return string(out)
}

// TestCUDAEngineLookupAllocates: a small flow lookup on the device
// through the Engine, as a datapath worker makes one a run (a slot of its
// own), allocates nothing on the Go heap, and answers.
func TestCUDAEngineLookupAllocates(t *testing.T) {
	c, err := NewCUDA(0)
	if err != nil {
		t.Skipf("SKIPPED: no usable CUDA device, the GPU backend is not tested: %v", err)
	}
	e := NewEngine(EngineConfig{Devices: []Backend{c}, MinBatch: 1})
	defer e.Close()
	soa, ids := loadInPortFlow(t, e, 2, 64)
	if err := e.LookupFlow(2, soa, 64, ids); err != nil || ids[0] == flow.NoMatch {
		t.Fatalf("lookup: %v, %v", ids[0], err)
	}
	a := testing.AllocsPerRun(100, func() { _ = e.LookupFlow(2, soa, 64, ids) })
	t.Logf("a device lookup of 64 keys: %v allocations", a)
	if a != 0 {
		t.Errorf("a device lookup of 64 keys allocates %v times per call", a)
	}
	if s := e.Stats(); s.KeysOnDevice == 0 || s.Fallbacks != 0 {
		t.Errorf("stats %+v: want the keys on the device", s)
	}
}

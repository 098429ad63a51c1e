package forward

import (
	"math"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestParseCPUList: taskset's core lists, and what is not one.
func TestParseCPUList(t *testing.T) {
	for s, want := range map[string]string{"0-3": "0-3", "4-15": "4-15", "0,2,4-7": "0,2,4-7", "3": "3", "1,0": "0-1"} {
		set, err := parseCPUList(s)
		if err != nil || cpuListString(set) != want {
			t.Errorf("parseCPUList(%q) = %q, %v; want %q", s, cpuListString(set), err, want)
		}
	}
	for _, bad := range []string{"", "a", "3-1", "-1", "0-", "1024", "0;1", "0 - 3"} {
		if _, err := parseCPUList(bad); err == nil {
			t.Errorf("parseCPUList(%q) accepted", bad)
		}
	}
}

// TestBenchCPUs: by default the bench takes the cores the switch does not
// get (of those it may use), an explicit list as given; "any", no
// --switch-cpus, or a switch list that leaves the bench no core: no
// pinning.
func TestBenchCPUs(t *testing.T) {
	var mine unix.CPUSet
	if err := unix.SchedGetaffinity(0, &mine); err != nil {
		t.Fatal(err)
	}
	first := -1
	for c := range 1024 {
		if mine.IsSet(c) {
			first = c
			break
		}
	}
	if _, ok, err := benchCPUs("", ""); ok || err != nil {
		t.Errorf("no lists: pinned %v, %v", ok, err)
	}
	if _, ok, err := benchCPUs("any", "0-3"); ok || err != nil {
		t.Errorf("any: pinned %v, %v", ok, err)
	}
	if set, ok, err := benchCPUs("4-15", "0-3"); !ok || err != nil || cpuListString(set) != "4-15" {
		t.Errorf("4-15: %s, %v, %v", cpuListString(set), ok, err)
	}
	if mine.Count() > 1 {
		set, ok, err := benchCPUs("", cpuListString(oneCPU(first)))
		if !ok || err != nil || set.IsSet(first) || set.Count() != mine.Count()-1 {
			t.Errorf("the rest of %s without %d: %s, %v, %v", cpuListString(mine), first, cpuListString(set), ok, err)
		}
	}
	if _, ok, err := benchCPUs("", cpuListString(mine)); ok || err != nil {
		t.Errorf("--switch-cpus %s, every core the bench may use: pinned %v, %v", cpuListString(mine), ok, err)
	}
	if _, _, err := benchCPUs("x", ""); err == nil {
		t.Error("--bench-cpus x accepted")
	}
}

func oneCPU(c int) unix.CPUSet {
	var s unix.CPUSet
	s.Set(c)
	return s
}

// TestPinProcess: every thread of the process ends up on the set (here
// the set it has already, so that the test changes nothing).
func TestPinProcess(t *testing.T) {
	var mine unix.CPUSet
	if err := unix.SchedGetaffinity(0, &mine); err != nil {
		t.Fatal(err)
	}
	if err := pinProcess(mine); err != nil {
		t.Fatal(err)
	}
	var now unix.CPUSet
	if err := unix.SchedGetaffinity(0, &now); err != nil || now != mine {
		t.Errorf("after pinProcess: %s, %v; want %s", cpuListString(now), err, cpuListString(mine))
	}
}

// TestCPUMaskHex: core sets in the kernel's cpumask text, and the
// comparison of two such texts.
func TestCPUMaskHex(t *testing.T) {
	for list, want := range map[string]string{"0": "1", "1": "2", "4-15": "fff0", "0-3": "f", "31": "80000000", "32": "1,00000000", "0,33": "2,00000001"} {
		set, err := parseCPUList(list)
		if err != nil {
			t.Fatal(err)
		}
		if got := cpuMaskHex(set); got != want {
			t.Errorf("cpuMaskHex(%s) = %q, want %q", list, got, want)
		}
	}
	for _, c := range []struct {
		a, b string
		same bool
	}{{"fff0", "0000fff0\n", true}, {"00000000,0000fff0", "fff0", true}, {"1,00000000", "100000000", true}, {"2", "1", false}, {"0", "1", false}} {
		if got := sameMask(c.a, c.b); got != c.same {
			t.Errorf("sameMask(%q, %q) = %v", c.a, c.b, got)
		}
	}
}

// TestParseProcStat: the machine's line and the sums of the switch's cores
// (irq and softirq within busy, steal outside it), from a /proc/stat of
// four cores; a core list the file does not name counts nothing.
func TestParseProcStat(t *testing.T) {
	const text = `cpu  100 1 50 800 5 2 40 3 0 0
cpu0 10 0 5 200 1 1 20 1 0 0
cpu1 20 1 10 190 2 0 10 0 0 0
cpu2 30 0 15 200 1 1 5 2 0 0
cpu3 40 0 20 210 1 0 5 0 0 0
intr 12345 0 0
ctxt 999
`
	set, err := parseCPUList("0,2")
	if err != nil {
		t.Fatal(err)
	}
	busy, steal, total, ts := parseProcStat(text, &set)
	if busy != 100+1+50+2+40 || steal != 3 || total != 1001 {
		t.Errorf("machine: busy %d steal %d total %d, want 193, 3, 1001", busy, steal, total)
	}
	// cpu0: busy 10+5+1+20 = 36, soft 21, total 238; cpu2: busy 30+15+1+5 = 51, soft 6, total 254.
	if want := (cpuTicks{busy: 87, soft: 27, total: 492, cores: 2}); ts != want {
		t.Errorf("cores 0,2: %+v, want %+v", ts, want)
	}
	far, _ := parseCPUList("7")
	if _, _, _, ts := parseProcStat(text, &far); ts.cores != 0 || ts.total != 0 {
		t.Errorf("core 7 of a four-core file: %+v, want nothing", ts)
	}
	if _, _, _, ts := parseProcStat(text, nil); ts.cores != 0 {
		t.Errorf("no set: %+v", ts)
	}
	s0 := cpuSample{set: cpuTicks{busy: 0, soft: 0, total: 100, cores: 2}}
	s1 := cpuSample{set: cpuTicks{busy: 150, soft: 50, total: 300, cores: 2}}
	if b, so := s1.setSince(s0); b != 1.5 || so != 0.5 {
		t.Errorf("setSince: %v busy, %v soft; want 1.5, 0.5", b, so)
	}
}

// TestCPUPerFrame: a step's switch CPU per forwarded frame is the cores
// the process kept busy times the time they were measured over, per frame.
func TestCPUPerFrame(t *testing.T) {
	for _, c := range []struct {
		cores   float64
		elapsed time.Duration
		frames  uint64
		want    float64
	}{
		{6, 3500 * time.Millisecond, 15_000_000, 1.4},
		{0.25, 4 * time.Second, 1_000_000, 1.0},
		{6, 3 * time.Second, 0, 0},
		{6, 0, 15_000_000, 0},
	} {
		if got := cpuPerFrameUs(c.cores, c.elapsed, c.frames); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("cpuPerFrameUs(%v, %v, %d) = %v, want %v", c.cores, c.elapsed, c.frames, got, c.want)
		}
	}
}

// TestSysSince: the process's system time over an interval, in cores; 0
// without a first sample of the process or with a clock that did not
// move.
func TestSysSince(t *testing.T) {
	t0 := time.Now()
	s0 := cpuSample{at: t0, proc: 1000, procSys: 400}
	s1 := cpuSample{at: t0.Add(2 * time.Second), proc: 2000, procSys: 700}
	if got := s1.sysSince(s0); math.Abs(got-1.5) > 1e-9 { // 300 ticks of 1/100 s in 2 s
		t.Errorf("sysSince = %v, want 1.5", got)
	}
	if _, _, proc := s1.since(s0); proc < s1.sysSince(s0) {
		t.Errorf("system time %v above the process's %v", s1.sysSince(s0), proc)
	}
	if got := s1.sysSince(cpuSample{at: t0}); got != 0 {
		t.Errorf("no process in the first sample: %v", got)
	}
	if got := s0.sysSince(s0); got != 0 {
		t.Errorf("no time: %v", got)
	}
}

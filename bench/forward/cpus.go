package forward

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The bench's own cores. Its generators share the machine with the switch
// under test; with --switch-cpus the switch has its cores, and unless
// --bench-cpus says otherwise the bench takes the others, so that the two
// do not take turns on the same cores (on the H200 machine, 2026-11-26,
// generators left on any core made gswitchd's latency tail and its
// lossless rate depend on where the scheduler put them).

// parseCPUList reads a core list as taskset -c takes it: numbers and
// ranges, comma separated ("0-3", "4-15", "0,2,4-7").
func parseCPUList(s string) (unix.CPUSet, error) {
	var set unix.CPUSet
	if strings.TrimSpace(s) == "" {
		return set, fmt.Errorf("an empty core list")
	}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.Atoi(lo)
		b := a
		if err == nil && isRange {
			b, err = strconv.Atoi(hi)
		}
		if err != nil || a < 0 || b < a || b >= 1024 {
			return set, fmt.Errorf("%q: want core numbers and ranges such as 0-3 or 0,2,4 (below 1024)", part)
		}
		for c := a; c <= b; c++ {
			set.Set(c)
		}
	}
	return set, nil
}

// benchCPUs is the set of cores the bench runs on: --bench-cpus; by
// default, with --switch-cpus, every core the process may use that the
// switch does not get; "any", no --switch-cpus, or a switch list that
// leaves the bench no core (a small machine): unchanged (ok false).
func benchCPUs(benchList, switchList string) (set unix.CPUSet, ok bool, err error) {
	switch {
	case benchList == "any" || benchList == "" && switchList == "":
		return set, false, nil
	case benchList != "":
		set, err = parseCPUList(benchList)
		return set, err == nil, err
	}
	sw, err := parseCPUList(switchList)
	if err != nil {
		return set, false, err
	}
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return set, false, fmt.Errorf("reading the bench's cores: %w", err)
	}
	for c := range 1024 {
		if sw.IsSet(c) {
			set.Clear(c)
		}
	}
	return set, set.Count() > 0, nil
}

// pinProcess holds every thread of this process to set; threads started
// later inherit it from the thread that starts them.
func pinProcess(set unix.CPUSet) error {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil && err != unix.ESRCH { // ESRCH: the thread ended meanwhile
			return fmt.Errorf("holding thread %d to the bench's cores: %w", tid, err)
		}
	}
	return nil
}

// cpuListString writes set as a core list ("4-15").
func cpuListString(set unix.CPUSet) string {
	var parts []string
	for c := 0; c < 1024; c++ {
		if !set.IsSet(c) {
			continue
		}
		e := c
		for e+1 < 1024 && set.IsSet(e+1) {
			e++
		}
		if e == c {
			parts = append(parts, strconv.Itoa(c))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", c, e))
		}
		c = e
	}
	return strings.Join(parts, ",")
}

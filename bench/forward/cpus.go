package forward

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/vishvananda/netns"
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

// The sinks' receive work. A frame sent on a veth is received by its peer
// in the sender's own system call: veth queues it on the sending core's
// backlog and that core's softirq runs the peer's receive path. The switch
// under test would then run its sinks' receive work on its own cores,
// which a NIC never asks of it. With --sink-rps the sinks' namespaces steer
// that work elsewhere by RPS: the namespace's rps_default_mask (Linux 6.2
// and later; per namespace), which the kernel copies to every receive
// queue of a device registered there, so it is set before the sink's veth
// end is created, and read back from the sink's interface after. It is off
// by default: on the H200 machine (2026-11-26) it slowed gswitchd and
// plain alike, an inter-processor interrupt and a remote backlog's lock a
// frame costing the sending core more than the receive work it handed away.

// rpsMask is the kernel's cpumask text of the core list (parseCPUList).
func rpsMask(list string) (string, error) {
	set, err := parseCPUList(list)
	if err != nil {
		return "", err
	}
	return cpuMaskHex(set), nil
}

// setRPSDefault sets namespace h's rps_default_mask to mask (cpumask text).
func setRPSDefault(h netns.NsHandle, mask string) error {
	return inNS(h, func() error {
		const f = "/proc/sys/net/core/rps_default_mask"
		if err := os.WriteFile(f, []byte(mask), 0); err != nil {
			return fmt.Errorf("writing %s: %w", f, err)
		}
		got, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if !sameMask(string(got), mask) {
			return fmt.Errorf("%s reads %q after writing %q (cores the machine lacks?)", f, strings.TrimSpace(string(got)), mask)
		}
		return nil
	})
}

// rxRPS reads the RPS cores of receive queue 0 of dev in namespace h
// (/sys/class/net/DEV/queues/rx-0/rps_cpus, which shows the devices of
// the namespace that mounted sysfs): on a thread of its own, in a mount
// namespace of its own (private, so nothing leaks out), with a sysfs of h
// mounted on a temporary folder.
func rxRPS(h netns.NsHandle, dev string) (string, error) {
	var mask string
	err := inNS(h, func() error {
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			return fmt.Errorf("unshare(CLONE_NEWNS): %w", err)
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			return fmt.Errorf("making the mounts private: %w", err)
		}
		dir, err := os.MkdirTemp("", "gswitch-sysfs-")
		if err != nil {
			return err
		}
		defer os.Remove(dir)
		if err := unix.Mount("sysfs", dir, "sysfs", 0, ""); err != nil {
			return fmt.Errorf("mounting sysfs: %w", err)
		}
		defer unix.Unmount(dir, unix.MNT_DETACH)
		b, err := os.ReadFile(dir + "/class/net/" + dev + "/queues/rx-0/rps_cpus")
		mask = strings.TrimSpace(string(b))
		return err
	})
	return mask, err
}

// sameMask reports whether two cpumask texts name the same cores
// (leading zero groups and digits aside).
func sameMask(a, b string) bool {
	norm := func(m string) string {
		return strings.TrimLeft(strings.ReplaceAll(strings.TrimSpace(m), ",", ""), "0")
	}
	return norm(a) == norm(b)
}

// cpuMaskHex writes set as the kernel's cpumask text: hexadecimal, in
// groups of 32 cores separated by commas, the highest first ("fff0",
// "1,00000000").
func cpuMaskHex(set unix.CPUSet) string {
	top := 0
	for c := range 1024 {
		if set.IsSet(c) {
			top = c
		}
	}
	var groups []string
	for g := top / 32; g >= 0; g-- {
		var w uint32
		for b := range 32 {
			if set.IsSet(g*32 + b) {
				w |= 1 << b
			}
		}
		if len(groups) == 0 {
			groups = append(groups, strconv.FormatUint(uint64(w), 16))
		} else {
			groups = append(groups, fmt.Sprintf("%08x", w))
		}
	}
	return strings.Join(groups, ",")
}

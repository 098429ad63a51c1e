package agent

import (
	"errors"
	"slices"
	"testing"
	"time"
)

// TestWorkerQueues: every receive queue goes to exactly one worker, the
// workers' shares differ by one queue at most, there are no more workers
// than queues, and ports loaded every other one (the senders' side of
// bench forward's pairs: ports 1, 3, 5, ...) spread evenly over the
// workers, as do each port's queues when there are as many per port as
// workers.
func TestWorkerQueues(t *testing.T) {
	for _, c := range []struct {
		queues []int
		n      int
	}{{[]int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 4}, {[]int{4, 4}, 3}, {[]int{4, 4, 4, 4}, 4}, {[]int{1, 3, 2}, 8}, {[]int{1}, 1}, {nil, 4}} {
		deal := workerQueues(c.queues, c.n)
		total := 0
		for _, q := range c.queues {
			total += q
		}
		if len(deal) != min(c.n, total) {
			t.Errorf("%v over %d: %d workers", c.queues, c.n, len(deal))
		}
		seen := map[[2]int]int{}
		least, most := total, 0
		for _, mine := range deal {
			least, most = min(least, len(mine)), max(most, len(mine))
			for _, pq := range mine {
				seen[pq]++
			}
		}
		for i, m := range c.queues {
			for q := range m {
				if seen[[2]int{i, q}] != 1 {
					t.Errorf("%v over %d: port %d queue %d dealt %d times", c.queues, c.n, i, q, seen[[2]int{i, q}])
				}
			}
		}
		if len(seen) != total || most-least > 1 {
			t.Errorf("%v over %d: %d queues dealt, shares %d to %d", c.queues, c.n, len(seen), least, most)
		}
	}
	// 16 ports, 4 workers: the even port indices (ports 1, 3, ...) two each.
	for k, mine := range workerQueues(slices.Repeat([]int{1}, 16), 4) {
		even := 0
		for _, pq := range mine {
			if pq[0]%2 == 0 {
				even++
			}
		}
		if even != 2 {
			t.Errorf("worker %d has %d of the every-other ports: %v", k, even, mine)
		}
	}
	// 4 ports of 4 queues, 4 workers: each worker a queue of every port.
	for k, mine := range workerQueues([]int{4, 4, 4, 4}, 4) {
		ports := map[int]bool{}
		for _, pq := range mine {
			ports[pq[0]] = true
		}
		if len(ports) != 4 {
			t.Errorf("worker %d serves the queues of %d ports: %v", k, len(ports), mine)
		}
	}
}

// TestRxWorkersFlag: --rx-workers is read (0 by default) and bounded.
func TestRxWorkersFlag(t *testing.T) {
	if st, err := loadArgs(t); err != nil || st.RxWorkers != 0 {
		t.Fatalf("default rx workers: %+v, %v", st, err)
	}
	if st, err := loadArgs(t, "--rx-workers", "4"); err != nil || st.RxWorkers != 4 {
		t.Errorf("--rx-workers 4: %+v, %v", st, err)
	}
	for _, bad := range []string{"-1", "1025"} {
		if _, err := loadArgs(t, "--rx-workers", bad); !errors.Is(err, ErrConfig) {
			t.Errorf("--rx-workers %s: %v, want a configuration error", bad, err)
		}
	}
}

// TestWorkerInFlightFlag: --worker-in-flight is read (0 by default) and
// bounded.
func TestWorkerInFlightFlag(t *testing.T) {
	if st, err := loadArgs(t); err != nil || st.WorkerFlight != 0 {
		t.Fatalf("default worker in flight: %+v, %v", st, err)
	}
	if st, err := loadArgs(t, "--rx-workers", "2", "--worker-in-flight", "2"); err != nil || st.WorkerFlight != 2 {
		t.Errorf("--worker-in-flight 2: %+v, %v", st, err)
	}
	for _, bad := range []string{"-1", "65"} {
		if _, err := loadArgs(t, "--rx-workers", "2", "--worker-in-flight", bad); !errors.Is(err, ErrConfig) {
			t.Errorf("--worker-in-flight %s: %v, want a configuration error", bad, err)
		}
	}
	if _, err := loadArgs(t, "--worker-in-flight", "2"); !errors.Is(err, ErrConfig) {
		t.Errorf("--worker-in-flight 2 without --rx-workers: %v, want a configuration error", err)
	}
	if st, err := loadArgs(t, "--rx-workers", "2", "--worker-in-flight", "2", "--worker-shared", "3"); err != nil || st.WorkerShared != 3 {
		t.Errorf("--worker-shared 3: %+v, %v", st, err)
	}
	for _, bad := range [][]string{{"--rx-workers", "2", "--worker-shared", "2"}, {"--rx-workers", "2", "--worker-in-flight", "2", "--worker-shared", "65"}} {
		if _, err := loadArgs(t, bad...); !errors.Is(err, ErrConfig) {
			t.Errorf("%v: %v, want a configuration error", bad, err)
		}
	}
}

// TestWorkerCloseFlag: --worker-close is deadline by default, eager when
// asked, and refused otherwise or without datapath workers.
func TestWorkerCloseFlag(t *testing.T) {
	if st, err := loadArgs(t); err != nil || st.WorkerClose != "deadline" {
		t.Fatalf("default worker close: %q, %v", st.WorkerClose, err)
	}
	if st, err := loadArgs(t, "--rx-workers", "2", "--worker-close", "eager"); err != nil || st.WorkerClose != "eager" {
		t.Errorf("--worker-close eager: %+v, %v", st, err)
	}
	for _, bad := range [][]string{{"--worker-close", "eager"}, {"--rx-workers", "2", "--worker-close", "soon"}, {"--rx-workers", "2", "--worker-close", "Eager"}} {
		if _, err := loadArgs(t, bad...); !errors.Is(err, ErrConfig) {
			t.Errorf("%v: %v, want a configuration error", bad, err)
		}
	}
}

// TestResidentLookupsFlags: --resident-lookups is off by default, its
// idle time 2ms; both are read and bounded.
func TestResidentLookupsFlags(t *testing.T) {
	if st, err := loadArgs(t); err != nil || st.Resident != 0 || st.ResidentIdle != 2*time.Millisecond {
		t.Fatalf("defaults: resident lookups %d, idle %v, %v", st.Resident, st.ResidentIdle, err)
	}
	if st, err := loadArgs(t, "--resident-lookups", "64", "--resident-idle", "20ms"); err != nil || st.Resident != 64 || st.ResidentIdle != 20*time.Millisecond {
		t.Errorf("--resident-lookups 64 --resident-idle 20ms: %d, %v, %v", st.Resident, st.ResidentIdle, err)
	}
	for _, bad := range [][]string{{"--resident-lookups", "-1"}, {"--resident-lookups", "1025"}, {"--resident-idle", "0s"}, {"--resident-idle", "11s"}} {
		if _, err := loadArgs(t, bad...); !errors.Is(err, ErrConfig) {
			t.Errorf("%v: %v, want a configuration error", bad, err)
		}
	}
}

package kick

import (
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// sleepMedian is the median time.Sleep(d) over n tries, each with kick
// called first.
func sleepMedian(n int, d time.Duration, kick func()) time.Duration {
	var ds []time.Duration
	for range n {
		t := time.Now()
		kick()
		time.Sleep(d)
		ds = append(ds, time.Since(t))
	}
	slices.Sort(ds)
	return ds[n/2]
}

// TestKickerShortSleep: with a Kicker armed at the deadline, a 100 µs
// sleep of an idle process ends well before the runtime's 1 ms rounding.
// (Without it the sleep takes about 1 ms; that is logged, not asserted:
// another busy goroutine of the test binary can make it precise too.) A
// loaded machine can keep the woken thread off a core for longer than
// that, so the test passes if one of three tries does; a Kicker that does
// not wake the sleep fails all three.
func TestKickerShortSleep(t *testing.T) {
	k, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	const d = 100 * time.Microsecond
	var tries []time.Duration
	for range 3 {
		plain := sleepMedian(50, d, func() {})
		kicked := sleepMedian(50, d, func() { k.Arm(d) })
		k.Disarm()
		t.Logf("time.Sleep(%v): median %v alone, %v kicked", d, plain, kicked)
		if kicked <= 600*time.Microsecond {
			return
		}
		tries = append(tries, kicked)
	}
	t.Errorf("kicked sleep of %v took %v at the median in three tries", d, tries)
}

// TestKickerArmDisarm: delays of Threshold or more and nil Kickers are
// no-ops; Disarm drains, so the next arming works again.
func TestKickerArmDisarm(t *testing.T) {
	var nk *Kicker
	nk.Arm(time.Microsecond) // no panic
	nk.Disarm()
	if nk.Close() != nil {
		t.Error("Close of nil")
	}
	k, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if k.Arm(Threshold); k.armed {
		t.Error("armed for a delay the runtime keeps itself")
	}
	for range 3 {
		k.Arm(10 * time.Microsecond)
		if !k.armed {
			t.Fatal("not armed")
		}
		time.Sleep(200 * time.Microsecond)
		k.Disarm()
	}
}

// TestKickerExpired: after its deadline Expired drains the timer, and a
// Kicker whose deadline has not come is stopped by it; either way the next
// arming fires again (one expiration to read).
func TestKickerExpired(t *testing.T) {
	var nk *Kicker
	nk.Expired() // no panic
	k, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	ticks := func() int {
		var b [8]byte
		if n, err := unix.Read(k.fd, b[:]); err != nil || n != 8 {
			return 0
		}
		return int(b[0])
	}
	for range 3 {
		k.Arm(10 * time.Microsecond)
		time.Sleep(200 * time.Microsecond)
		k.Expired()
		if k.armed || ticks() != 0 {
			t.Fatal("not drained after its deadline")
		}
	}
	k.Arm(500 * time.Microsecond) // long before its deadline
	k.Expired()
	time.Sleep(2 * time.Millisecond)
	if n := ticks(); n != 0 {
		t.Fatalf("a Kicker stopped before its deadline fired anyway (%d)", n)
	}
	k.Arm(10 * time.Microsecond)
	time.Sleep(time.Millisecond)
	if n := ticks(); n != 1 {
		t.Fatalf("re-armed: %d expirations, want 1", n)
	}
	k.armed = false
}

// TestPool: concurrent waiters each get a Kicker of their own, and the
// pool reuses them.
func TestPool(t *testing.T) {
	var p Pool
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[*Kicker]bool{}
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				k := p.Get()
				if k == nil {
					t.Error("no kicker")
					return
				}
				k.Arm(50 * time.Microsecond)
				time.Sleep(50 * time.Microsecond)
				mu.Lock()
				seen[k] = true
				mu.Unlock()
				p.Put(k)
			}
		}()
	}
	wg.Wait()
	if len(seen) > 8 || len(seen) == 0 {
		t.Errorf("%d kickers for 8 waiters", len(seen))
	}
}

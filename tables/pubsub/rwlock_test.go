package pubsub

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestSpinRWExclusion: writers exclude each other and the readers; readers
// share; with one processor too (waiters must yield to the holder).
func TestSpinRWExclusion(t *testing.T) {
	for _, procs := range []int{1, 4} {
		old := runtime.GOMAXPROCS(procs)
		var l spinRW
		var readers, writers atomic.Int32
		var maxReaders atomic.Int32
		var x, y int // written by writers under the lock, read by readers
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for r := 0; r < 3; r++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					l.RLock()
					n := readers.Add(1)
					if n > maxReaders.Load() {
						maxReaders.Store(n)
					}
					if writers.Load() != 0 {
						t.Error("a reader beside a writer")
					}
					if x != y {
						t.Errorf("torn write seen: %d %d", x, y)
					}
					time.Sleep(time.Microsecond)
					readers.Add(-1)
					l.RUnlock()
				}
			}()
		}
		for w := 0; w < 2; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 300; i++ {
					l.Lock()
					if writers.Add(1) != 1 || readers.Load() != 0 {
						t.Error("a writer beside another holder")
					}
					x++
					runtime.Gosched()
					y++
					writers.Add(-1)
					l.Unlock()
				}
			}()
		}
		// The writers finish (are not starved by the readers' stream).
		done := make(chan struct{})
		go func() {
			for {
				l.RLock()
				ok := x == 600 && y == 600
				l.RUnlock()
				if ok {
					break
				}
				time.Sleep(time.Millisecond)
			}
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("GOMAXPROCS=%d: writers starved", procs)
		}
		close(stop)
		wg.Wait()
		runtime.GOMAXPROCS(old)
		if l.state.Load() != 0 {
			t.Errorf("state %d after all unlocked", l.state.Load())
		}
	}
}

// TestSpinRWLongHold: a waiter behind a long hold (a deploy) sleeps and
// gets the lock once it is released.
func TestSpinRWLongHold(t *testing.T) {
	var l spinRW
	l.Lock()
	got := make(chan struct{})
	go func() {
		l.RLock()
		l.RUnlock()
		close(got)
	}()
	time.Sleep(5 * time.Millisecond)
	select {
	case <-got:
		t.Fatal("a reader got the lock while a writer held it")
	default:
	}
	l.Unlock()
	select {
	case <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("the reader did not get the lock")
	}
}

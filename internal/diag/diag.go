// Package diag starts the diagnostics of a whole gswitchd run: a CPU
// profile (runtime/pprof) and an execution trace of a window of the run
// (runtime/trace), for gswitchd's --cpuprofile and --trace flags.
//
// A CPU profile says where the processors' time goes; an execution trace
// says what each goroutine waited for, which a profile cannot: how long a
// woken goroutine waited for a processor (go tool trace -pprof=sched), the
// time spent in system calls and cgo, the collector's cycles. On a loaded
// switch a trace grows by tens of MB a second, so it covers a window: it
// starts a delay after gswitchd does and stops after a span.
//
// Each Start function creates its file at once (a path that cannot be
// written is an error before gswitchd starts) and returns the function
// that ends the diagnostic and closes the file, to be called once when
// the run ends.
package diag

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"runtime/trace"
	"sync"
	"time"
)

// ErrFile wraps the errors of a diagnostic's file (it could not be
// created).
var ErrFile = errors.New("diag: file")

// StartCPUProfile starts a CPU profile written to path (nothing for an
// empty path) and returns the function that ends it.
func StartCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	pf, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFile, err)
	}
	if err := pprof.StartCPUProfile(pf); err != nil {
		pf.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		pf.Close()
	}, nil
}

// StartTrace creates path (nothing for an empty path) and, on a goroutine
// of its own, starts an execution trace into it after the delay after and
// stops it after span (0: when stop is called). A trace that cannot start
// (another is running) is reported on warn. The function it returns stops
// the trace, if it runs, and closes the file.
func StartTrace(path string, after, span time.Duration, warn io.Writer) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	if after < 0 || span < 0 {
		return nil, fmt.Errorf("%w: a trace's delay and span must not be negative", ErrFile)
	}
	tf, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFile, err)
	}
	var mu sync.Mutex // guards running and stopped
	running, stopped := false, false
	end := func() {
		mu.Lock()
		defer mu.Unlock()
		if running {
			trace.Stop()
			running = false
		}
	}
	go func() {
		time.Sleep(after)
		mu.Lock()
		if stopped {
			mu.Unlock()
			return
		}
		if err := trace.Start(tf); err != nil {
			fmt.Fprintln(warn, "trace:", err)
		} else {
			running = true
		}
		mu.Unlock()
		if span > 0 {
			time.Sleep(span)
			end()
		}
	}()
	return func() {
		end()
		mu.Lock()
		stopped = true
		mu.Unlock()
		tf.Close()
	}, nil
}

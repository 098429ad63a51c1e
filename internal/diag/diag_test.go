package diag

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestTraceWindow: the trace starts after its delay and stops after its
// span; the file holds a trace (its header) once stop returns.
func TestTraceWindow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.out")
	var warn bytes.Buffer
	stop, err := StartTrace(path, 20*time.Millisecond, 30*time.Millisecond, &warn)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	stop()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("go 1.")) || warn.Len() != 0 {
		t.Fatalf("trace file starts %q (%d bytes), warnings %q", b[:min(len(b), 16)], len(b), warn.String())
	}
}

// TestStopBeforeStart: a run that ends before the trace's delay leaves an
// empty file and no trace running.
func TestStopBeforeStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.out")
	stop, err := StartTrace(path, time.Hour, 0, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	stop()
	if fi, err := os.Stat(path); err != nil || fi.Size() != 0 {
		t.Fatalf("%v, %v: want an empty file", fi, err)
	}
}

// TestBadFiles: a file that cannot be created, and a negative window, are
// ErrFile before anything starts; empty paths start nothing.
func TestBadFiles(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "no", "such", "dir", "f")
	if _, err := StartTrace(bad, 0, 0, &bytes.Buffer{}); !errors.Is(err, ErrFile) {
		t.Errorf("trace into %s: %v", bad, err)
	}
	if _, err := StartCPUProfile(bad); !errors.Is(err, ErrFile) {
		t.Errorf("profile into %s: %v", bad, err)
	}
	if _, err := StartTrace(filepath.Join(t.TempDir(), "t"), -time.Second, 0, &bytes.Buffer{}); !errors.Is(err, ErrFile) {
		t.Errorf("negative delay: %v", err)
	}
	for _, f := range []func() (func(), error){
		func() (func(), error) { return StartCPUProfile("") },
		func() (func(), error) { return StartTrace("", 0, 0, nil) },
	} {
		stop, err := f()
		if err != nil {
			t.Fatal(err)
		}
		stop()
	}
}

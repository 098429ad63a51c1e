package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gswitch/gswitch/internal/shareddata"
)

// runJSON runs gswitchctl with --json and decodes its output.
func runJSON(t *testing.T, args ...string) ([]result, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(append(args, "--json"), &out, &errb)
	var rs []result
	dec := json.NewDecoder(&out)
	for dec.More() {
		var r result
		if derr := dec.Decode(&r); derr != nil {
			t.Fatalf("bad JSON output: %v\n%s", derr, out.String())
		}
		rs = append(rs, r)
	}
	if err != nil {
		t.Logf("stderr: %s", errb.String())
	}
	return rs, err
}

func TestBenchLPMCheck(t *testing.T) {
	fib := shareddata.Path(t, "fib/bgp-full-table.txt.gz")
	rs, err := runJSON(t, "bench", "lpm", "--fib", fib, "--check", "--lookups", "50000", "--rounds", "1",
		"--updates", "20000", "--updates-per-sec", "20000", "--duration", "300ms")
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 4 { // two families × two traffic kinds
		t.Fatalf("got %d results, want 4", len(rs))
	}
	for _, r := range rs {
		if r.Checked == 0 || r.Mismatches != 0 {
			t.Errorf("%d/%s: checked %d, mismatches %d", r.Family, r.Traffic, r.Checked, r.Mismatches)
		}
		if r.Entries < 100000 || r.MLPS <= 0 || r.BuildMS <= 0 || r.BytesPerEntry <= 0 {
			t.Errorf("%d/%s: implausible result %+v", r.Family, r.Traffic, r)
		}
		if r.UpdatesPerSec <= 0 || r.MLPSUnderUpdates <= 0 || r.VisibleP50us <= 0 {
			t.Errorf("%d/%s: no lookups-under-updates figures: %+v", r.Family, r.Traffic, r)
		}
	}
}

func TestBenchClassifyCheck(t *testing.T) {
	acl := shareddata.Path(t, "classbench/acl1_20000.txt")
	for _, args := range [][]string{
		{"--classbench", acl},
		{"--synthetic", "2000,40,4,3,12"},
	} {
		rs, err := runJSON(t, append([]string{"bench", "classify", "--check", "--lookups", "20000", "--rounds", "1"}, args...)...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if len(rs) != 4 {
			t.Fatalf("%v: got %d results, want one per algorithm (linear, tuple, bloom, merge)", args, len(rs))
		}
		for _, r := range rs {
			if r.Checked == 0 || r.Mismatches != 0 || r.MPPS <= 0 || r.Entries == 0 {
				t.Errorf("%v %s: %+v", args, r.Algo, r)
			}
		}
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"frobnicate"},
		{"bench"},
		{"bench", "lpm"},
		{"bench", "lpm", "--fib", "x", "--family", "5"},
		{"bench", "lpm", "--fib", "x", "--backend", "tpu"},
		{"bench", "lpm", "--fib", "x", "--backend", "gpu"},
		{"bench", "lpm", "--fib", "x", "stray"},
		{"bench", "classify"},
		{"bench", "classify", "--classbench", "a", "--synthetic", "1,1"},
		{"bench", "classify", "--synthetic", "10,20"},
		{"bench", "classify", "--synthetic", "100,2", "--algo", "quantum"},
	} {
		var out, errb bytes.Buffer
		err := run(args, &out, &errb)
		if !errors.Is(err, errUsage) {
			t.Errorf("%q: got %v, want a usage error", args, err)
		}
	}
}

func TestBadFilesAreErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.txt")
	if err := os.WriteFile(bad, []byte("10.0.0.0/8\nnot-a-prefix\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	err := run([]string{"bench", "lpm", "--fib", bad}, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "bad.txt:2") {
		t.Errorf("bad FIB: got %v, want an error naming bad.txt:2", err)
	}
	err = run([]string{"bench", "classify", "--classbench", bad}, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "bad.txt:1") {
		t.Errorf("bad ClassBench file: got %v, want an error naming bad.txt:1", err)
	}
	if err := run([]string{"bench", "lpm", "--fib", filepath.Join(dir, "absent")}, &out, &errb); err == nil {
		t.Error("absent FIB accepted")
	}
}

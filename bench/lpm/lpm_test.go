package lpm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gswitch/gswitch/bench/benchutil"
	"github.com/gswitch/gswitch/internal/shareddata"
)

// runJSON runs the benchmark with --json and decodes its output.
func runJSON(t *testing.T, args ...string) ([]benchutil.Result, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := Run(context.Background(), append(args, "--json"), &out, &errb)
	var rs []benchutil.Result
	dec := json.NewDecoder(&out)
	for dec.More() {
		var r benchutil.Result
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
	rs, err := runJSON(t, "--fib", fib, "--check", "--lookups", "50000", "--rounds", "1",
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

// TestBenchLPMSmall runs one family and one traffic kind on a small table
// and checks the text form.
func TestBenchLPMSmall(t *testing.T) {
	fib := filepath.Join(t.TempDir(), "fib.txt")
	if err := os.WriteFile(fib, []byte("10.0.0.0/8\n10.1.0.0/16\n192.0.2.0/24\n2001:db8::/32\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if err := Run(context.Background(), []string{"--fib", fib, "--family", "4", "--traffic", "table", "--lookups", "1000",
		"--rounds", "1", "--updates", "0", "--check"}, &out, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	for _, want := range []string{"lpm cpu/gamt traffic=table entries=3", "checked 1000 lookups", "0 mismatches", "# data: "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "IPv6") {
		t.Errorf("--family 4 ran IPv6:\n%s", out.String())
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--fib", "x", "--family", "5"},
		{"--fib", "x", "--backend", "tpu"},
		{"--fib", "x", "--backend", "gpu"}, // the test binary has no cuda tag
		{"--fib", "x", "stray"},
		{"--fib", "x", "--traffic", "bursty"},
		{"--fib", "x", "--apply-on", "nobody"},
		{"--fib", "x", "--duration", "0s"},
		{"--fib", "x", "--rounds", "0"},
		{"--fib", "x", "--no-such-flag"},
	} {
		var out, errb bytes.Buffer
		if err := Run(context.Background(), args, &out, &errb); !errors.Is(err, benchutil.ErrUsage) {
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
	err := Run(context.Background(), []string{"--fib", bad}, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "bad.txt:2") {
		t.Errorf("bad FIB: got %v, want an error naming bad.txt:2", err)
	}
	if err := Run(context.Background(), []string{"--fib", filepath.Join(dir, "absent")}, &out, &errb); err == nil {
		t.Error("absent FIB accepted")
	}
}

// TestCancelled: a cancelled context ends the run before any family.
func TestCancelled(t *testing.T) {
	fib := filepath.Join(t.TempDir(), "fib.txt")
	if err := os.WriteFile(fib, []byte("10.0.0.0/8\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errb bytes.Buffer
	if err := Run(ctx, []string{"--fib", fib}, &out, &errb); !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled", err)
	}
}

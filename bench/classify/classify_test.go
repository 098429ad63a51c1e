package classify

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

func TestBenchClassifyCheck(t *testing.T) {
	acl := shareddata.Path(t, "classbench/acl1_20000.txt")
	for _, args := range [][]string{
		{"--classbench", acl},
		{"--synthetic", "2000,40,4,3,12"},
	} {
		// --check-sample bounds the brute-force scans (by default about 2e8
		// rule comparisons per algorithm: minutes under the race detector).
		rs, err := runJSON(t, append([]string{"--check", "--check-sample", "3000", "--lookups", "20000", "--rounds", "1"}, args...)...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if len(rs) != 4 {
			t.Fatalf("%v: got %d results, want one per algorithm (linear, tuple, bloom, merge)", args, len(rs))
		}
		for _, r := range rs {
			if r.Checked != 3000 || r.Mismatches != 0 || r.MPPS <= 0 || r.Entries == 0 {
				t.Errorf("%v %s: %+v", args, r.Algo, r)
			}
		}
	}
}

// TestAlgoSubset: --algo picks the runs, in the order given.
func TestAlgoSubset(t *testing.T) {
	rs, err := runJSON(t, "--synthetic", "500,10", "--algo", "bloom,tuple", "--lookups", "2000", "--rounds", "1")
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[0].Algo != "bloom" || rs[1].Algo != "tuple" {
		t.Fatalf("got %+v, want bloom then tuple", rs)
	}
	if rs[0].Work != "classify" || rs[0].Traffic != "rules" || rs[0].Rules != 500 || rs[0].Lookups != 2000 {
		t.Errorf("%+v", rs[0])
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--classbench", "a", "--synthetic", "1,1"},
		{"--synthetic", "10,20"},
		{"--synthetic", "100,2", "--algo", "quantum"},
		{"--synthetic", "100,2", "--lookups", "0"},
		{"--synthetic", "100,2", "--threads", "0"},
		{"--synthetic", "100,2", "--backend", "gpu"}, // the test binary has no cuda tag
	} {
		var out, errb bytes.Buffer
		if err := Run(context.Background(), args, &out, &errb); !errors.Is(err, benchutil.ErrUsage) {
			t.Errorf("%q: got %v, want a usage error", args, err)
		}
	}
}

func TestBadFilesAreErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.txt")
	if err := os.WriteFile(bad, []byte("10.0.0.0/8\nnot-a-prefix\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	err := Run(context.Background(), []string{"--classbench", bad}, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "bad.txt:1") {
		t.Errorf("bad ClassBench file: got %v, want an error naming bad.txt:1", err)
	}
}

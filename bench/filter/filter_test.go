package filter

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/gswitch/gswitch/tables/filter"
)

// TestRunJSON runs the bench on a small synthetic capture and checks its
// figures and the first filter's count against tcpdump (--check).
func TestRunJSON(t *testing.T) {
	args := []string{"--packets", "3000", "--filters", "1,50", "--rounds", "1", "--json"}
	if _, err := exec.LookPath("tcpdump"); err != nil {
		args = append(args, "--tcpdump=false", "--check=false")
	}
	var out, errb bytes.Buffer
	if err := Run(context.Background(), args, &out, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	dec := json.NewDecoder(&out)
	for _, want := range []int{1, 50} {
		var r Result
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		if r.Filters != want || r.Packets != 3000 || r.MPPS <= 0 || r.MPPSFile <= 0 || r.FirstCount == 0 || r.Matches < r.FirstCount {
			t.Errorf("result %+v", r)
		}
	}
}

// TestSpecsCompile: every generated set compiles and its filters are
// distinct.
func TestSpecsCompile(t *testing.T) {
	specs := Specs(300)
	seen := map[string]bool{}
	for _, s := range specs {
		if seen[s.Expr] {
			t.Errorf("duplicate %q", s.Expr)
		}
		seen[s.Expr] = true
	}
	if _, err := filter.Compile(specs, filter.LinkEthernet, false, nil); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkEval is go test -bench's form of the figures: Eval over a
// synthetic capture, 1, 100 and 1,000 filters.
func BenchmarkEval(b *testing.B) {
	path := filepath.Join(b.TempDir(), "s.pcapng")
	if err := WriteSynthetic(path, 100000, 1); err != nil {
		b.Fatal(err)
	}
	pkts, link, big, err := load(path)
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{1, 100, 1000} {
		prog, err := filter.Compile(Specs(n), link, big, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("filters="+strconv.Itoa(n), func(b *testing.B) {
			ev := filter.NewEvaluator(prog)
			out := make([]uint64, prog.Words())
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				p := &pkts[i%len(pkts)]
				ev.Eval(p.data, p.wire, out)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mpps")
		})
	}
}

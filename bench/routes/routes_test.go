package routes

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gswitch/gswitch/bench/benchutil"
	"github.com/gswitch/gswitch/internal/shareddata"
	"github.com/gswitch/gswitch/tables/lpm"
)

// TestBenchRoutesDirect runs bench routes --via direct on a sample of the
// real table with --check: every field the issue asks for is present and
// the engine agrees with the brute-force reference.
func TestBenchRoutesDirect(t *testing.T) {
	benchRoutesSample(t, "--via", "direct")
}

// TestBenchRoutesNetlink is TestBenchRoutesDirect through a private
// namespace's kernel table, the changes sent over 4 netlink sockets at once
// and mirrored by kernelfib (root: it creates the namespace).
func TestBenchRoutesNetlink(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: bench routes --via netlink creates a network namespace")
	}
	benchRoutesSample(t, "--via", "netlink", "--netlink-senders", "4")
}

// benchRoutesSample runs bench routes on every 200th prefix of the real
// table, both families, and checks the JSON.
func benchRoutesSample(t *testing.T, via ...string) {
	all, err := lpm.OpenPrefixFile(shareddata.Path(t, "fib/bgp-full-table.txt.gz"))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for i := 0; i < len(all); i += 200 {
		b.WriteString(all[i].String() + "\n")
	}
	fib := filepath.Join(t.TempDir(), "fib.txt")
	if err := os.WriteFile(fib, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	err = Run(context.Background(), append([]string{"--fib", fib, "--updates-per-sec", "2000", "--duration", "100ms",
		"--rounds", "2", "--samples", "40", "--check", "--check-sample", "5000", "--lookups", "4096", "--json"}, via...), &out, &errb)
	if err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	dec := json.NewDecoder(&out)
	n := 0
	for dec.More() {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"routes", "routes_per_sec", "visible_p50_us", "visible_p99_us", "mlps_idle", "mlps_under_updates", "loss_pct", "checked", "mismatches"} {
			if _, ok := m[k]; !ok {
				t.Errorf("IPv%v: no field %s", m["family"], k)
			}
		}
		if m["checked"].(float64) != 5000 || m["mismatches"].(float64) != 0 || m["routes"].(float64) < 500 || m["routes_per_sec"].(float64) <= 0 {
			t.Errorf("IPv%v: %v", m["family"], m)
		}
		if r, _ := m["loss_pct_rounds"].([]any); len(r) != 2 || m["tick_us"] != 200.0 || m["via"] != via[1] {
			t.Errorf("IPv%v: loss_pct_rounds %v, tick_us %v, via %v", m["family"], m["loss_pct_rounds"], m["tick_us"], m["via"])
		}
		n++
	}
	if n != 2 {
		t.Fatalf("%d results, want one per family:\n%s", n, out.String())
	}
}

func TestBenchRoutesUsage(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--fib", "x", "--via", "carrier-pigeon"},
		{"--fib", "x", "--family", "5"},
		{"--fib", "x", "--updates-per-sec", "-1"},
		{"--fib", "x", "--duration", "0s"},
		{"--fib", "x", "--tick", "0s"},
		{"--fib", "x", "--netlink-senders", "0"},
		{"--fib", "x", "--backend", "cpu,tpu"},
		{"--fib", "x", "stray"},
	} {
		var out, errb bytes.Buffer
		if err := Run(context.Background(), args, &out, &errb); !errors.Is(err, benchutil.ErrUsage) {
			t.Errorf("%q: got %v, want a usage error", args, err)
		}
	}
}

// TestPrefixShard: a prefix always goes to the same sender, and the senders
// share the prefixes.
func TestPrefixShard(t *testing.T) {
	var ps []netip.Prefix
	for i := range 4000 {
		ps = append(ps, netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(i >> 8), byte(i), 0, 0}), 16+i%9))
	}
	count := make([]int, 4)
	for _, p := range ps {
		k := prefixShard(p, 4)
		if k != prefixShard(p, 4) || k < 0 || k >= 4 {
			t.Fatalf("%v: shard %d, then %d", p, k, prefixShard(p, 4))
		}
		count[k]++
	}
	for k, n := range count {
		if n < len(ps)/8 {
			t.Errorf("sender %d got %d of %d prefixes: %v", k, n, len(ps), count)
		}
	}
	if a, b := netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("10.0.0.0/16"); prefixShard(a, 1<<20) == prefixShard(b, 1<<20) {
		t.Errorf("%v and %v share a shard of 1<<20: the length is not hashed", a, b)
	}
}

package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The OpenFlow Switch Test Tool (os-ken's tests/switch/tester.py) against
// gswitchd, through integration/switchtest/run.sh: gswitchd is the target
// (datapath id 1), an Open vSwitch netdev bridge the tester (datapath id
// 2), wired port N to port N. See integration/switchtest/RESULTS.md for the
// measured figures the floors below come from.

// switchtestSubset is the default run: a handful of match and action
// patterns (well under 2 minutes), with the passes measured on them. A
// result below a floor fails the test with the tool's output.
var switchtestSubset = []struct {
	file  string
	floor int // tests of the file that must pass (all of its tests, where gswitchd passes them all)
}{
	{"match/00_IN_PORT.json", 9},
	{"match/03_ETH_DST.json", 9},
	{"match/05_ETH_TYPE.json", 9},
	{"match/11_IPV4_SRC.json", 12},
	{"match/14_TCP_DST_IPv4.json", 12},
	{"action/00_OUTPUT.json", 3},
	{"action/17_PUSH_VLAN.json", 3},
	{"action/24_DEC_NW_TTL_IPv4.json", 4},
	{"action/25_SET_FIELD/03_ETH_DST.json", 3},
	{"action/25_SET_FIELD/11_IPV4_SRC.json", 4},
	// Our own group and meter patterns (switchtest/patterns, written by
	// its gen.py): the single-packet files. The rate files (NAME_rate.json)
	// run in the full run only: they need the tool's Python sender to keep
	// 150 packets/s or more, and beside go test -race of three packages on
	// the 2-core machine it sent about 55 (RESULTS.md).
	{ownPatterns + "group/00_ALL.json", 3},
	{ownPatterns + "group/01_SELECT.json", 1},
	{ownPatterns + "group/02_INDIRECT.json", 3},
	{ownPatterns + "group/03_FF.json", 2},
	{ownPatterns + "meter/01_DROP.json", 1},
	{ownPatterns + "meter/02_DSCP_REMARK.json", 1},
}

// ownPatterns prefixes a subset file that lives in this repository
// (integration/switchtest/patterns) rather than in the shared set.
const ownPatterns = "switchtest/patterns/"

// patternFile returns the path of a subset file.
func patternFile(root, file string) string {
	if strings.HasPrefix(file, ownPatterns) {
		abs, _ := filepath.Abs(file)
		return abs
	}
	return filepath.Join(root, file)
}

// switchtestFullFloor is a lower bound of the tests of the full run
// (GSWITCH_SWITCHTEST=full: every match and action pattern of the shared
// set and our group and meter patterns) gswitchd passes: 768 of 780 were
// measured (RESULTS.md), in two runs the same; the 12 failures are the
// SCTP set-field tests no switch can pass (switchtest/sctp_checksum.py).
// The floor leaves a margin of 8 for timing: the tool's Python sender in
// the 10 rate tests and its packet races on a busy machine.
const switchtestFullFloor = 760

var resultRE = regexp.MustCompile(`(?m)^RESULT (folder=(\S+)|total) ok=(\d+) error=(\d+) total=(\d+)(?: complete=(\w+))?$`)

type switchtestResult struct {
	ok, errors, total int
	complete          bool
}

// runSwitchtest runs the harness over paths and returns its results by
// folder ("" for the total) and its whole output.
func runSwitchtest(t *testing.T, limit time.Duration, paths ...string) (map[string]switchtestResult, string) {
	t.Helper()
	needRoot(t)
	needTool(t, "ovs-vswitchd", "openvswitch-switch")
	needTool(t, "ovsdb-server", "openvswitch-switch")
	needTool(t, "osken-manager", "python3-os-ken")
	logDir := t.TempDir()
	args := []string{"--gswitchd", gswitchdBinary(t), "--timeout", strconv.Itoa(int(limit.Seconds())), "--log", logDir}
	ctx, cancel := context.WithTimeout(context.Background(), limit+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "switchtest/run.sh", append(args, paths...)...)
	cmd.WaitDelay = 30 * time.Second
	out, err := cmd.CombinedOutput()
	tool, _ := os.ReadFile(filepath.Join(logDir, "tester.log"))
	all := fmt.Sprintf("run.sh output:\n%s\ntester.log:\n%s", out, tool)
	if err != nil {
		gsw, _ := os.ReadFile(filepath.Join(logDir, "gswitchd.log"))
		t.Fatalf("switchtest/run.sh: %v\n%s\ngswitchd.log (tail):\n%s", err, all, tail(string(gsw), 4000))
	}
	res := map[string]switchtestResult{}
	for _, m := range resultRE.FindAllStringSubmatch(string(out), -1) {
		ok, _ := strconv.Atoi(m[3])
		e, _ := strconv.Atoi(m[4])
		n, _ := strconv.Atoi(m[5])
		res[m[2]] = switchtestResult{ok: ok, errors: e, total: n, complete: m[6] == "yes"}
	}
	if r, found := res[""]; !found || !r.complete {
		t.Fatalf("the tool did not run to its end:\n%s", all)
	}
	return res, all
}

// failures returns the tool's ERROR lines of a run's output, each with
// the line after it (the reason).
func failures(all string) string {
	lines := strings.Split(all, "\n")
	var out []string
	for i, l := range lines {
		if strings.HasSuffix(strings.TrimRight(l, "\r"), " ERROR") {
			out = append(out, l)
			if i+1 < len(lines) {
				out = append(out, lines[i+1])
			}
		}
	}
	return strings.Join(out, "\n")
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// patternRoot is the shared OpenFlow 1.3 pattern set.
func patternRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../../shared/data/ryu-of13")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "match")); err != nil {
		t.Fatalf("the Switch Test Tool patterns are missing: %v (see ../shared/data/README.md)", err)
	}
	return root
}

// TestSwitchTestTool runs the tool on a small subset of the OpenFlow 1.3
// patterns against gswitchd, one run per pattern file so that each file's
// floor is checked; with GSWITCH_SWITCHTEST=full, on every match and action
// pattern and our group and meter patterns (switchtest/patterns).
func TestSwitchTestTool(t *testing.T) {
	root := patternRoot(t)
	if os.Getenv("GSWITCH_SWITCHTEST") == "full" {
		t.Log("GSWITCH_SWITCHTEST=full: every match and action pattern and our group and meter patterns (about 6 minutes on a 2-core machine; run with -timeout 40m)")
		res, all := runSwitchtest(t, 30*time.Minute, filepath.Join(root, "match"), filepath.Join(root, "action"),
			patternFile(root, ownPatterns+"group"), patternFile(root, ownPatterns+"meter"))
		for f, r := range res {
			t.Logf("folder %q: %d of %d passed", f, r.ok, r.total)
		}
		t.Logf("failed tests and the tool's reasons:\n%s", failures(all))
		if r := res[""]; r.ok < switchtestFullFloor {
			t.Fatalf("%d of %d tests passed, fewer than the %d measured (RESULTS.md):\n%s", r.ok, r.total, switchtestFullFloor, all)
		}
		return
	}
	t.Log("running a subset of the Switch Test Tool's patterns; GSWITCH_SWITCHTEST=full runs all of them (about 6 minutes)")
	// One run over the subset's files, staged as one folder per file so
	// that the harness reports each file's counts.
	stage := t.TempDir()
	var paths []string
	for _, s := range switchtestSubset {
		dir := filepath.Join(stage, strings.TrimSuffix(strings.ReplaceAll(s.file, "/", "__"), ".json"))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(patternFile(root, s.file), filepath.Join(dir, filepath.Base(s.file))); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, dir)
	}
	start := time.Now()
	res, all := runSwitchtest(t, 3*time.Minute, paths...)
	t.Logf("the tool ran in %v", time.Since(start).Round(time.Second))
	// The tool's test packets race the switch on a busy machine (go test
	// runs other packages beside this one): a file may lose a test or two
	// from run to run. (The tester bridge runs without its datapath flow
	// cache, run.sh's default: with it, a CI run lost 5 tests to "Receiving
	// timeout: increment in rx_packets in tester" — the tester counted the
	// packet gswitchd forwarded but a stale cached flow kept it from the
	// tool.) So the subset as a whole must reach the measured total
	// less switchtestSlack, and every file at least half its floor.
	var bad []string
	sum, floors := 0, 0
	for _, s := range switchtestSubset {
		name := strings.TrimSuffix(strings.ReplaceAll(s.file, "/", "__"), ".json")
		r := res[name]
		t.Logf("%-40s %d of %d passed (measured %d)", s.file, r.ok, r.total, s.floor)
		sum, floors = sum+r.ok, floors+s.floor
		if 2*r.ok < s.floor || r.total == 0 {
			bad = append(bad, fmt.Sprintf("%s: %d of %d passed, measured %d", s.file, r.ok, r.total, s.floor))
		}
	}
	if sum < floors-switchtestSlack {
		bad = append(bad, fmt.Sprintf("the subset: %d passed, measured %d (slack %d)", sum, floors, switchtestSlack))
	}
	if len(bad) > 0 {
		t.Fatalf("below the measured pass counts:\n  %s\n%s", strings.Join(bad, "\n  "), all)
	}
}

// switchtestSlack is how many of the subset's measured passes a run may
// lose to the tool's timing races before the test fails.
const switchtestSlack = 4

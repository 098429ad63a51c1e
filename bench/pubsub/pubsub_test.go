package pubsub

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/gswitch/gswitch/bench/benchutil"
)

func TestBenchPubSubJSON(t *testing.T) {
	var out, errb bytes.Buffer
	err := Run(context.Background(), []string{"--scale", "0.004", "--events", "300", "--latency-samples", "100", "--rounds", "1",
		"--batches", "1,64", "--sweep", "constraints,interfaces", "--check", "50", "--threads", "2", "--json"}, &out, &errb)
	if err != nil {
		t.Fatalf("%v: %s", err, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 8 {
		t.Fatalf("%d results, want 8 (4 constraints + 4 interfaces points)", len(lines))
	}
	total := -1
	for _, l := range lines {
		var r Result
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		if r.Work != "pubsub" || r.Checked != 50 || r.Mismatches != 0 || len(r.Batches) != 2 || r.Batches[1].Batch != 64 ||
			r.Batches[0].EventsPerSec <= 0 || r.LatencyP50US <= 0 || r.DeployMS <= 0 || r.Constraints <= 0 {
			t.Errorf("result %s", l)
		}
		if r.Sweep == "interfaces" {
			// The interfaces sweep keeps the total number of filters.
			if total < 0 {
				total = r.Filters
			} else if r.Filters < total/2 || r.Filters > total*2 {
				t.Errorf("interfaces %d: %d filters, the first point had %d", r.Interfaces, r.Filters, total)
			}
		}
	}
}

func TestBenchPubSubTable(t *testing.T) {
	var out bytes.Buffer
	if err := Run(context.Background(), []string{"--scale", "0.002", "--events", "100", "--latency-samples", "50", "--rounds", "1"}, &out, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "default") || !strings.Contains(out.String(), "ev/s b=16384 (per cpu-s)") {
		t.Errorf("table:\n%s", out.String())
	}
}

func TestBenchPubSubUsage(t *testing.T) {
	for _, args := range [][]string{{"--sweep", "colours"}, {"--scale", "0"}, {"--batches", "0"}, {"--backend", "tpu"}, {"--rounds", "0"}, {"extra"}} {
		var out bytes.Buffer
		if err := Run(context.Background(), args, &out, &out); !errors.Is(err, benchutil.ErrUsage) {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
	var out bytes.Buffer
	err := Run(context.Background(), []string{"--backend", "gpu"}, &out, &out)
	if err == nil || errors.Is(err, benchutil.ErrUsage) || !strings.Contains(err.Error(), "not in this build") {
		t.Errorf("--backend gpu: %v", err)
	}
}

// TestBenchPubSubChurn runs the churn measurement on the CPU backend: both
// kinds of rounds measured, changes applied (about the asked rate on an
// idle machine; at least some on a loaded one), none left behind.
func TestBenchPubSubChurn(t *testing.T) {
	var out, errb bytes.Buffer
	err := Run(context.Background(), []string{"--scale", "0.002", "--events", "200", "--latency-samples", "20", "--rounds", "2",
		"--batches", "64", "--check", "10", "--churn", "2000", "--churn-clients", "3", "--churn-batch", "32", "--churn-seconds", "0.1", "--json"}, &out, &errb)
	if err != nil {
		t.Fatalf("%v: %s", err, errb.String())
	}
	var r Result
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	c := r.Churn
	if c == nil || c.Path != "table" || c.Clients != 3 || c.Rounds != 2 || c.Batch != 32 || c.QuietEventsPerSec <= 0 || c.ChurnEventsPerSec <= 0 ||
		c.Changes < 10 || c.AchievedRate <= 0 || c.ChangeP50US <= 0 || r.DeployTableMS <= 0 || len(c.PairLossPct) != 2 ||
		c.LossP25Pct > c.LossPct || c.LossPct > c.LossP75Pct {
		t.Fatalf("churn %+v, result %s", c, out.String())
	}
	if r.Filters == 0 {
		t.Fatal("no filters")
	}
}

// TestBenchPubSubChurnLock runs --churn-op lock (the table's write lock
// alone) and rejects an unknown --churn-op.
func TestBenchPubSubChurnLock(t *testing.T) {
	var out, errb bytes.Buffer
	err := Run(context.Background(), []string{"--scale", "0.002", "--events", "200", "--latency-samples", "20", "--rounds", "1",
		"--batches", "64", "--check", "10", "--churn", "2000", "--churn-op", "lock", "--churn-batch", "32", "--churn-seconds", "0.1", "--json"}, &out, &errb)
	if err != nil {
		t.Fatalf("%v: %s", err, errb.String())
	}
	var r Result
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if c := r.Churn; c == nil || c.Op != "lock" || c.Changes < 10 || c.ChurnEventsPerSec <= 0 {
		t.Fatalf("churn %+v", c)
	}
	err = Run(context.Background(), []string{"--scale", "0.002", "--churn", "100", "--churn-op", "nothing"}, &out, &errb)
	if !errors.Is(err, benchutil.ErrUsage) {
		t.Fatalf("--churn-op nothing: %v", err)
	}
}

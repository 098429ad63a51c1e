package pubsubcmd

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gswitch/gswitch/tables/pubsub"
)

// backendCase is a subscriptions file and an events file to match with
// both backends.
type backendCase struct {
	name         string
	subs, events string
	want         [][]uint32 // the brute-force evaluator's ports per event
}

// backendCases makes the files compareBackends matches: a small CCM
// scenario (numeric and string constraints over 10 names) whose 5,001
// events include some that match nothing (no attributes, only an unknown
// name, a known name with a value of another type) scattered among them,
// and a subscriptions file without subscriptions.
func backendCases(t *testing.T) []backendCase {
	t.Helper()
	sc := pubsub.Scenario{Interfaces: 6, FiltersMin: 40, FiltersMax: 80, ConstraintsMin: 1, ConstraintsMax: 4,
		Names: 10, AttrsMin: 1, AttrsMax: 5, NumericShare: 0.5, Values: 10, Words: 10, Seed: 11}
	specs := sc.Subscriptions()
	var st strings.Builder
	st.WriteString("# generated: pubsub.Scenario seed 11\n")
	for _, s := range specs {
		st.WriteString(s.String() + "\n")
	}
	evs := sc.Events(5001)
	odd := []string{`{}`, `{"nobody": 1}`, `{"nobody": "x", "other": true}`}
	for i := range evs {
		if i%97 == 5 {
			e, err := pubsub.DecodeJSON([]byte(odd[(i/97)%len(odd)]))
			if err != nil {
				t.Fatal(err)
			}
			evs[i] = e
		}
		if i%89 == 3 && len(evs[i].Attrs) > 0 {
			// The first attribute's value of another type.
			a := &evs[i].Attrs[0]
			if a.Value.Type == pubsub.TypeString {
				a.Value = pubsub.Bool(true)
			} else {
				a.Value = pubsub.Str("x")
			}
		}
	}
	var et []byte
	for i := range evs {
		et = append(evs[i].AppendJSON(et), '\n')
		if i == 10 {
			et = append(et, '\n') // a blank line is not an event
		}
	}
	events := write(t, "events.jsonl", string(et))
	want := make([][]uint32, len(evs))
	none := make([][]uint32, len(evs))
	for i := range evs {
		want[i] = pubsub.BruteMatch(specs, &evs[i])
	}
	return []backendCase{
		{"scenario", write(t, "subs.txt", st.String()), events, want},
		{"no subscriptions", write(t, "empty.txt", "# nobody subscribes\n\n"), events, none},
	}
}

// compareBackends runs match with --backend cpu and --backend gpu on
// backendCases for batch sizes that do not divide the event count (1, 7,
// the small-batch path's 16 and one past it, 999) and the default, and
// wants the same bytes from both, the brute-force evaluator's ports on
// every line, and, in the scenario, lines with no port and lines with
// several.
func compareBackends(t *testing.T) {
	for _, c := range backendCases(t) {
		for _, batch := range []string{"1", "7", "16", "17", "999", ""} {
			args := []string{"match", "--subs", c.subs, "--events", c.events}
			if batch != "" {
				args = append(args, "--batch", batch)
			}
			cpu, err := run(t, append(args, "--backend", "cpu")...)
			if err != nil {
				t.Fatalf("%s, batch %q, cpu: %v", c.name, batch, err)
			}
			gpu, err := run(t, append(args, "--backend", "gpu")...)
			if err != nil {
				t.Fatalf("%s, batch %q, gpu: %v", c.name, batch, err)
			}
			cl, gl := strings.SplitAfter(cpu, "\n"), strings.SplitAfter(gpu, "\n")
			if len(cl) != len(c.want)+1 || cl[len(cl)-1] != "" {
				t.Fatalf("%s, batch %q: cpu: %d lines for %d events", c.name, batch, len(cl)-1, len(c.want))
			}
			empty, several := 0, 0
			for i, w := range c.want {
				want := string(AppendMatchLine(nil, i, w))
				if cl[i] != want {
					t.Fatalf("%s, batch %q, cpu line %d: %q, want %q", c.name, batch, i, cl[i], want)
				}
				if i >= len(gl) || gl[i] != cl[i] {
					got := "nothing"
					if i < len(gl) {
						got = strconv.Quote(gl[i])
					}
					t.Fatalf("%s, batch %q, gpu line %d: %s, cpu %q", c.name, batch, i, got, cl[i])
				}
				switch {
				case len(w) == 0:
					empty++
				case len(w) > 1:
					several++
				}
			}
			if gpu != cpu {
				t.Fatalf("%s, batch %q: gpu's %d bytes differ from cpu's %d after the last event", c.name, batch, len(gpu), len(cpu))
			}
			if c.name == "scenario" && (empty < 50 || several == 0 || empty == len(c.want)) {
				t.Fatalf("scenario: %d events match nothing, %d several ports, of %d: not the mix the test needs", empty, several, len(c.want))
			}
		}
	}
}

// TestMatchWriteOrder: batches are matched in input order, never empty,
// and a matcher's error or short answer stops the output with the events'
// range named.
func TestMatchWriteOrder(t *testing.T) {
	evs := make([]pubsub.Event, 10)
	var sizes []int
	var sb strings.Builder
	err := writeMatches(&sb, evs, 4, func(b []pubsub.Event, out [][]uint32) ([][]uint32, error) {
		sizes = append(sizes, len(b))
		out = out[:0]
		for range b {
			out = append(out, []uint32{uint32(len(sizes))})
		}
		return out, nil
	})
	if err != nil || !slices.Equal(sizes, []int{4, 4, 2}) {
		t.Fatalf("batches %v, %v", sizes, err)
	}
	if !strings.HasPrefix(sb.String(), "{\"event\": 0, \"ports\": [1]}\n") || !strings.HasSuffix(sb.String(), "{\"event\": 9, \"ports\": [3]}\n") {
		t.Fatalf("output %q", sb.String())
	}
	sb.Reset()
	err = writeMatches(&sb, evs, 4, func(b []pubsub.Event, out [][]uint32) ([][]uint32, error) { return out[:0], nil })
	if err == nil || !strings.Contains(err.Error(), "events 0..3") {
		t.Fatalf("short answer: %v", err)
	}
}

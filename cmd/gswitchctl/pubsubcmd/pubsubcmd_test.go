package pubsubcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gswitch/gswitch/controlproto/pubsubapi"
	"github.com/gswitch/gswitch/tables/pubsub"
)

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := Run(args, &out, &errb)
	return out.String(), err
}

func write(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestMatchAgainstOracle: match's output, line for line, is the
// brute-force evaluator's answer, for several batch sizes.
func TestMatchAgainstOracle(t *testing.T) {
	sc := pubsub.Scenario{Interfaces: 5, FiltersMin: 30, FiltersMax: 60, ConstraintsMin: 1, ConstraintsMax: 4,
		Names: 8, AttrsMin: 1, AttrsMax: 6, NumericShare: 0.5, Values: 10, Words: 10, Seed: 7}
	specs := sc.Subscriptions()
	var st strings.Builder
	for _, s := range specs {
		st.WriteString(s.String() + "\n")
	}
	evs := sc.Events(300)
	var et []byte
	for i := range evs {
		et = append(evs[i].AppendJSON(et), '\n')
		if i == 10 {
			et = append(et, '\n') // a blank line is not an event
		}
	}
	subs, events := write(t, "subs.txt", st.String()), write(t, "events.jsonl", string(et))
	for _, batch := range []string{"1", "7", "4096"} {
		out, err := run(t, "match", "--subs", subs, "--events", events, "--batch", batch)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if len(lines) != len(evs) {
			t.Fatalf("batch %s: %d lines for %d events", batch, len(lines), len(evs))
		}
		for i, l := range lines {
			var v struct {
				Event int
				Ports []uint32
			}
			if err := json.Unmarshal([]byte(l), &v); err != nil {
				t.Fatalf("line %d %q: %v", i, l, err)
			}
			want := pubsub.BruteMatch(specs, &evs[i])
			if v.Event != i || !slices.Equal(v.Ports, want) || (len(want) == 0 && !strings.HasSuffix(l, `"ports": []}`)) {
				t.Fatalf("batch %s line %d: %s, want ports %v", batch, i, l, want)
			}
		}
	}
}

func TestMatchLineFormat(t *testing.T) {
	if got := string(AppendMatchLine(nil, 3, []uint32{1, 20})); got != "{\"event\": 3, \"ports\": [1, 20]}\n" {
		t.Errorf("%q", got)
	}
	if got := string(AppendMatchLine(nil, 0, nil)); got != "{\"event\": 0, \"ports\": []}\n" {
		t.Errorf("%q", got)
	}
}

func TestUsageErrors(t *testing.T) {
	subs := write(t, "s.txt", "1: x = 1\n")
	evs := write(t, "e.jsonl", "{\"x\": 1}\n")
	for _, args := range [][]string{
		{}, {"frobnicate"}, {"match"}, {"match", "--subs", subs}, {"match", "--subs", subs, "--events", evs, "--batch", "0"},
		{"match", "--subs", subs, "--events", evs, "--backend", "tpu"}, {"subscribe", "x = 1"}, {"subscribe", "--port", "1"},
		{"subscribe", "--port", "1", "x >"}, {"unsubscribe"}, {"unsubscribe", "--id", "x"}, {"publish", "--to", "127.0.0.1:9"},
		{"explain", "{bad"}, {"list", "extra"},
	} {
		if _, err := run(t, args...); !errors.Is(err, ErrUsage) {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
	bad := write(t, "bad.txt", "1: x = 1\n2: y ^= 5\n")
	if _, err := run(t, "match", "--subs", bad, "--events", evs); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("bad subscriptions: %v", err)
	}
	badEv := write(t, "bad.jsonl", "{\"x\": 1}\n{\"x\": [1]}\n")
	if _, err := run(t, "match", "--subs", subs, "--events", badEv); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("bad events: %v", err)
	}
}

// TestClientCommands drives an in-process subscription service.
func TestClientCommands(t *testing.T) {
	tab := pubsub.New()
	srv, err := pubsubapi.New(pubsubapi.Config{Table: tab})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, l) }()
	defer func() { cancel(); <-done }()
	api := l.Addr().String()
	out, err := run(t, "subscribe", "--api", api, "--port", "2", `price > 10 && sym ^= "AB"`)
	if err != nil || out != "subscription 1\n" {
		t.Fatalf("subscribe: %q %v", out, err)
	}
	if _, err := run(t, "subscribe", "--api", api, "--port", "3", "price", "<", "5"); err != nil {
		t.Fatal(err)
	}
	out, err = run(t, "list", "--api", api)
	if err != nil || !strings.Contains(out, `price > 10 && sym ^= "AB"`) || !strings.Contains(out, "price < 5") {
		t.Fatalf("list: %q %v", out, err)
	}
	out, err = run(t, "explain", "--api", api, `{"price": 12, "sym": "ABC"}`)
	if err != nil || !strings.Contains(out, "ports [2]") || !strings.Contains(out, "MATCH") {
		t.Fatalf("explain: %q %v", out, err)
	}
	out, err = run(t, "stats", "--api", api, "--json")
	if err != nil || !strings.Contains(out, `"subscriptions": 2`) {
		t.Fatalf("stats: %q %v", out, err)
	}
	if _, err := run(t, "unsubscribe", "--api", api, "--id", "99"); err == nil || !strings.Contains(err.Error(), "NotFound") {
		t.Fatalf("unsubscribe of an unknown id: %v", err)
	}
	out, err = run(t, "unsubscribe", "--api", api, "--id", "1,2")
	if err != nil || out != "removed [1 2]\n" || tab.Stats().Subscriptions != 0 {
		t.Fatalf("unsubscribe: %q %v", out, err)
	}
}

func TestPublish(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	evs := write(t, "e.jsonl", "{\"x\": 1}\n\n{\"s\": \"two\", \"f\": 2.5}\n")
	out, err := run(t, "publish", "--to", pc.LocalAddr().String(), "--events", evs)
	if err != nil || out != "published 2 events to "+pc.LocalAddr().String()+"\n" {
		t.Fatalf("publish: %q %v", out, err)
	}
	buf := make([]byte, 1500)
	for _, want := range []string{"{x=1}", `{s="two", f=2.5}`} {
		n, _, err := pc.ReadFrom(buf)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := pubsub.DecodeWire(buf[:n])
		if err != nil || ev.String() != want {
			t.Errorf("datagram %v %v, want %s", ev.String(), err, want)
		}
	}
}

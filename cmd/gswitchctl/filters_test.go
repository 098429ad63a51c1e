package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gswitch/gswitch/agent/ctl"
	"github.com/gswitch/gswitch/datapath/filters"
)

// filterSource is switchSource with a live filter set.
type filterSource struct {
	switchSource
	set *filters.Set
}

func (s filterSource) Filters() []filters.Info                   { return s.set.Filters() }
func (s filterSource) FilterInfo(n string) (filters.Info, error) { return s.set.Info(n) }
func (s filterSource) AddFilter(c filters.Config) error          { return s.set.Add(c) }
func (s filterSource) DeleteFilter(n string) error               { return s.set.Delete(n) }

func serveFilters(t *testing.T) (string, *filters.Set) {
	t.Helper()
	set := filters.New(filters.Options{})
	t.Cleanup(set.Close)
	path := filepath.Join(t.TempDir(), "gswitchd.sock")
	l, err := ctl.Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ctl.Serve(ctx, l, filterSource{set: set}) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return path, set
}

func filtersCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(append([]string{"filters"}, args...), &out, &errb)
	return out.String(), err
}

func TestFiltersCommand(t *testing.T) {
	sock, set := serveFilters(t)
	out, err := filtersCmd(t, "add", "web", "tcp port 80", "--ports", "1,2", "--socket", sock)
	if err != nil || !strings.Contains(out, "web") || !strings.Contains(out, "1,2") {
		t.Fatalf("add: %q, %v", out, err)
	}
	_, err = filtersCmd(t, "add", "bad", "tcp port", "--socket", sock)
	if err == nil || !strings.HasPrefix(err.Error(), "filter bad: position") || errors.Is(err, errUsage) {
		t.Fatalf("bad add: %v", err)
	}
	set.Rx(1, [][]byte{make([]byte, 60)}, nil)
	out, err = filtersCmd(t, "list", "--json", "--socket", sock)
	var list []filters.Info
	if err != nil || json.Unmarshal([]byte(out), &list) != nil || len(list) != 1 || list[0].Name != "web" {
		t.Fatalf("list --json: %q, %v", out, err)
	}
	out, err = filtersCmd(t, "show", "web", "--socket", sock)
	if err != nil || !strings.Contains(out, "tcp port 80") {
		t.Fatalf("show: %q, %v", out, err)
	}
	if _, err = filtersCmd(t, "del", "web", "--socket", sock); err != nil {
		t.Fatal(err)
	}
	if _, err = filtersCmd(t, "show", "web", "--socket", sock); err == nil {
		t.Fatal("show of a deleted filter succeeded")
	}
	for _, args := range [][]string{{}, {"frob"}, {"add", "x"}, {"list", "extra"}, {"del", "x", "--ports", "1"},
		{"add", "x", "tcp", "--ports", "a"}, {"add", "x", "tcp", "--max-bytes", "10"}} {
		if _, err := filtersCmd(t, append(args, "--socket", sock)...); !errors.Is(err, errUsage) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}

package main

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
)

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"frobnicate"},
		{"bench"},
		{"bench", "nope"},
		{"bench", "lpm"},
		{"bench", "classify"},
		{"bench", "routes"},
		{"bench", "p4rt", "--batches", "0"},
		{"bench", "forward", "--targets", "linux"},
		{"bench", "plain-forwarder", "--pairs", "0"},
		{"bench", "lpm", "--fib", "x", "--family", "5"},
		{"bench", "classify", "--synthetic", "100,2", "--algo", "quantum"},
	} {
		var out, errb bytes.Buffer
		if err := run(args, &out, &errb); !errors.Is(err, errUsage) {
			t.Errorf("%q: got %v, want a usage error", args, err)
		}
	}
}

// TestBenchHelp: every bench work is wired to its package: -h prints its
// flags and is no error for main.
func TestBenchHelp(t *testing.T) {
	for work, flagName := range map[string]string{"lpm": "-fib", "classify": "-classbench", "p4rt": "-entries",
		"routes": "-via", "forward": "-targets", "plain-forwarder": "-pairs"} {
		var out, errb bytes.Buffer
		err := run([]string{"bench", work, "-h"}, &out, &errb)
		if !errors.Is(err, flag.ErrHelp) || !strings.Contains(errb.String(), flagName) {
			t.Errorf("bench %s -h: %v, want flag.ErrHelp and the %s flag in:\n%s", work, err, flagName, errb.String())
		}
	}
}

func TestVersion(t *testing.T) {
	for _, arg := range []string{"--version", "version"} {
		var out, errb bytes.Buffer
		if err := run([]string{arg}, &out, &errb); err != nil {
			t.Fatal(err)
		}
		if s := out.String(); !strings.HasPrefix(s, "gswitchctl ") || !strings.Contains(s, "go1.") || strings.Count(s, "\n") != 1 {
			t.Errorf("%s: %q", arg, s)
		}
	}
}

func TestHelp(t *testing.T) {
	var out, errb bytes.Buffer
	if err := run([]string{"help"}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"bench lpm", "bench forward", "show ports", "--version"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("help lacks %q", w)
		}
	}
}

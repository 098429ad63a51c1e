package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestExitStatus: 0 for --help, --version, --print-config and a clean
// stop; 2 and a one-line error for a configuration mistake; 1 for a
// failure at start.
func TestExitStatus(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "g.sock")
	cases := []struct {
		args       []string
		code       int
		out, errIn string
	}{
		{[]string{"--help"}, 0, "", "-print-config"},
		{[]string{"--version"}, 0, "gswitchd ", ""},
		{[]string{"--print-config", "--tables", "7"}, 0, "tables: 7\n", ""},
		{[]string{"--bogus"}, 2, "", "gswitchd: configuration: flag provided but not defined: -bogus"},
		{[]string{"--tables", "0"}, 2, "", "gswitchd: configuration: tables 0: want 1..254\n"},
		{[]string{"extra"}, 2, "", "gswitchd: configuration: unexpected argument \"extra\"\n"},
		{[]string{"--backend", "cpu", "--p4rt-listen", "off", "--ctl-socket", filepath.Join(dir, "no", "such", "dir", "g.sock")}, 1, "", "gswitchd: ctl:"},
	}
	for _, c := range cases {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), c.args, &stdout, &stderr)
		if code != c.code || !strings.Contains(stdout.String(), c.out) || !strings.Contains(stderr.String(), c.errIn) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d, stdout with %q, stderr with %q",
				c.args, code, stdout.String(), stderr.String(), c.code, c.out, c.errIn)
		}
		// A configuration mistake is one line (after the usage text the
		// flag package prints for a flag it does not know).
		if lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n"); c.code == 2 &&
			(!strings.HasPrefix(lines[len(lines)-1], "gswitchd: configuration: ") || len(lines) > 1 && c.args[0] != "--bogus") {
			t.Errorf("%v: stderr %q, want one line", c.args, stderr.String())
		}
	}

	// A clean stop: the context ends (as a signal ends it) and the exit
	// status is 0, the control socket removed.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var stderr bytes.Buffer
	go func() {
		done <- run(ctx, []string{"--backend", "cpu", "--p4rt-listen", "off", "--ctl-socket", sock, "--log-level", "error"}, &bytes.Buffer{}, &stderr)
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("gswitchd made no control socket")
		}
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d after a clean stop, stderr %q", code, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("gswitchd did not stop")
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Fatalf("the control socket after the stop: %v", err)
	}
}

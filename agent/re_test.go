package agent

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/gswitch/gswitch/datapath/re"
	"github.com/gswitch/gswitch/gpu"
)

// TestREConfig: the re: section from the file and the flags, and each
// mistake a one-line configuration error naming the setting.
func TestREConfig(t *testing.T) {
	dir := t.TempDir()
	n := 0
	write := func(s string) string {
		n++
		p := filepath.Join(dir, fmt.Sprintf("re%d.yaml", n))
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	st, err := loadArgs(t)
	if err != nil || st.re.on {
		t.Fatalf("default: re on %v, %v; want off", st.re.on, err)
	}
	file := write("ports: [{number: 2, interface: lo}]\nre: {port: 2, match: \"tcp port 80\", log_bytes: 1048576, window: 32, bits: 8, ack_interval: 5ms, impair: {loss: 0.01, reorder: 0.01, seed: 7}}\n")
	st, err = loadArgs(t, "--config", file)
	if err != nil || !st.re.on || st.re.match == nil || st.re.cfg.LogBytes != 1<<20 || st.re.ack.Milliseconds() != 5 || st.RE.Impair.Seed != 7 {
		t.Fatalf("file: %+v %v", st.re, err)
	}
	// auto: both with 4 processors or more, else the split receive path
	// (bundles are on by default).
	if auto := runtime.GOMAXPROCS(0) >= autoPipelineProcs; st.re.encPipe != auto || !st.re.rxSplit {
		t.Errorf("default pipeline (auto, GOMAXPROCS %d): encoder goroutine %v, split receive %v; want %v, true", runtime.GOMAXPROCS(0), st.re.encPipe, st.re.rxSplit, auto)
	}
	st, err = loadArgs(t, "--port", "3=lo", "--re-port", "3", "--re-match", "tcp", "--re-log-bytes", "200000")
	if err != nil || !st.re.on || st.RE.Port != 3 || st.re.cfg.LogBytes != 200000 || st.re.ack != defaultAckInterval {
		t.Fatalf("flags: %+v %v", st.re, err)
	}
	for _, c := range []struct {
		v          string
		enc, split bool
	}{{"on", true, true}, {"off", false, false}, {"encoder", true, false}, {"decoder", false, true},
		{"auto", runtime.GOMAXPROCS(0) >= autoPipelineProcs, true}} {
		st, err = loadArgs(t, "--config", write("ports: [{number: 2, interface: lo}]\nre: {port: 2, pipeline: "+c.v+"}\n"))
		if err != nil || st.re.encPipe != c.enc || st.re.rxSplit != c.split {
			t.Errorf("pipeline %s: encoder goroutine %v, split receive %v, %v; want %v, %v", c.v, st.re.encPipe, st.re.rxSplit, err, c.enc, c.split)
		}
	}
	if !st.re.bundle {
		t.Error("bundle: want on by default")
	}
	for v, want := range map[string]bool{"on": true, "off": false} {
		st, err = loadArgs(t, "--config", write("ports: [{number: 2, interface: lo}]\nre: {port: 2, bundle: "+v+"}\n"))
		if err != nil || st.re.bundle != want {
			t.Errorf("bundle %s: %v, %v; want %v", v, st.re.bundle, err, want)
		}
		// Without bundles, auto splits nothing below 4 processors.
		if split := want || runtime.GOMAXPROCS(0) >= autoPipelineProcs; st.re.rxSplit != split {
			t.Errorf("bundle %s, pipeline auto (GOMAXPROCS %d): split receive %v; want %v", v, runtime.GOMAXPROCS(0), st.re.rxSplit, split)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--config", write("ports: [{number: 2, interface: lo}]\nre: {port: 2, bundle: maybe}\n")}, "bundle"},
		{[]string{"--re-port", "2"}, "port 2 is not one of ports"},
		{[]string{"--port", "2=lo", "--re-port", "2", "--re-match", "tcp port"}, "re: match"},
		{[]string{"--port", "2=lo", "--re-port", "2", "--re-match", "nonsense("}, "re: match"},
		{[]string{"--port", "2=lo", "--re-port", "2", "--re-log-bytes", "1000"}, "64 KiB"},
		{[]string{"--re-match", "tcp"}, "without re.port"},
		{[]string{"--config", write("ports: [{number: 2, interface: lo}]\nre: {port: 2, bits: 40}\n")}, "bits"},
		{[]string{"--config", write("ports: [{number: 2, interface: lo}]\nre: {port: 2, impair: {loss: 1.5}}\n")}, "impair"},
		{[]string{"--config", write("ports: [{number: 2, interface: lo}]\nre: {port: 2, ack_interval: 2s}\n")}, "ack_interval"},
		{[]string{"--config", write("ports: [{number: 2, interface: lo}]\nre: {port: 2, bogus: 1}\n")}, "bogus"},
		{[]string{"--config", write("ports: [{number: 2, interface: lo}]\nre: {port: 2, pipeline: both}\n")}, "pipeline"},
	} {
		_, err := loadArgs(t, c.args...)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: %v; want a one-line configuration error with %q", c.args, err, c.want)
		}
	}
}

// nopSender is a port that takes every frame.
type nopSender struct{ n int }

func (s *nopSender) Send(frames [][]byte) (int, error) { s.n += len(frames); return len(frames), nil }

// TestREMatcherAndCollector: the match program selects the encoder's
// frames from several goroutines, and the collector's families lint clean
// with the encoder's counters.
func TestREMatcherAndCollector(t *testing.T) {
	st, err := loadArgs(t, "--port", "2=lo", "--re-port", "2", "--re-match", "tcp port 80")
	if err != nil {
		t.Fatal(err)
	}
	m := newREMatcher(st.re.match)
	http := tcpTestFrame(80, 5000, make([]byte, 200))
	other := tcpTestFrame(22, 5000, make([]byte, 200))
	done := make(chan bool, 8)
	for range 8 {
		go func() { done <- m.match(http) && !m.match(other) }()
	}
	for range 8 {
		if !<-done {
			t.Fatal("match: tcp port 80 frame not matched, or port 22 matched")
		}
	}
	cfg := st.re.cfg
	cfg.Match = m.match
	out := &nopSender{}
	l, err := re.NewLink(cfg, out, [6]byte{2, 0, 0, 0, 0, 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Send([][]byte{http, other}); err != nil || out.n != 2 {
		t.Fatalf("send: %v, %d frames out", err, out.n)
	}
	c := newRECollector(&reLink{link: l, port: 2, iface: "lo"})
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil || len(problems) != 0 {
		t.Fatalf("lint: %v %v", err, problems)
	}
	want := `# HELP gswitch_re_encoder_frames_total Frames the encoder handled, by outcome: encoded, raw (eligible but sent unchanged), passed (not eligible).
# TYPE gswitch_re_encoder_frames_total counter
gswitch_re_encoder_frames_total{outcome="encoded",port="2"} 0
gswitch_re_encoder_frames_total{outcome="passed",port="2"} 1
gswitch_re_encoder_frames_total{outcome="raw",port="2"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "gswitch_re_encoder_frames_total"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(c); n != 23 { // 20, and bundles (two sides) and bundled frames
		t.Errorf("%d metrics, want 23", n)
	}
}

// tcpTestFrame is an Ethernet/IPv4/TCP frame (checksums not set: the
// encoder does not check them).
func tcpTestFrame(sport, dport uint16, payload []byte) []byte {
	f := make([]byte, 54+len(payload))
	f[12], f[13] = 0x08, 0x00
	ip := f[14:]
	ip[0] = 0x45
	n := 40 + len(payload)
	ip[2], ip[3] = byte(n>>8), byte(n)
	ip[8], ip[9] = 64, 6
	copy(ip[12:], []byte{10, 0, 0, 1, 10, 0, 0, 2})
	tcp := ip[20:]
	tcp[0], tcp[1], tcp[2], tcp[3] = byte(sport>>8), byte(sport), byte(dport>>8), byte(dport)
	tcp[12] = 5 << 4
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	copy(tcp[20:], payload)
	return f
}

// TestREMarkersCPUEngine: an engine without a device gives the encoder no
// device markers (it fingerprints on the CPU).
func TestREMarkersCPUEngine(t *testing.T) {
	d := &Agent{eng: gpu.NewEngine(gpu.EngineConfig{}), log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	defer d.eng.Close()
	if mk := d.reMarkers(re.Config{}); mk != nil {
		t.Errorf("device markers %s on an engine without devices", mk.Name())
	}
	if mk := (&Agent{}).reMarkers(re.Config{}); mk != nil {
		t.Error("device markers without an engine")
	}
}

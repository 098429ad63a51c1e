package agent

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gswitch/gswitch/datapath/afpacket"
)

// loadArgs parses a command line and builds its configuration.
func loadArgs(t *testing.T, args ...string) (*settings, error) {
	t.Helper()
	f := newFlags()
	if err := f.fs.Parse(args); err != nil {
		return nil, err
	}
	return f.load()
}

func TestDefaultConfig(t *testing.T) {
	st, err := loadArgs(t)
	if err != nil {
		t.Fatal(err)
	}
	if st.dpid != 1 || st.Tables != 4 || st.Backend != "auto" || st.MaxDelay != 100*time.Microsecond ||
		st.CtlSocket != "/run/gswitchd.sock" || st.failMode.String() != "secure" || len(st.Ports) != 0 {
		t.Fatalf("embedded default: %+v", st)
	}
}

func TestFileThenFlags(t *testing.T) {
	file := filepath.Join(t.TempDir(), "g.yaml")
	yaml := "datapath_id: 0xabc\ntables: 8\nmax_delay: 2ms\nports:\n  - {number: 3, interface: lo}\ncontrollers: [\"tcp:127.0.0.1:6653\"]\n"
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := loadArgs(t, "--config", file, "--tables", "2", "--datapath-id", "77", "--gpus", "0,1")
	if err != nil {
		t.Fatal(err)
	}
	if st.dpid != 77 || st.Tables != 2 || st.MaxDelay != 2*time.Millisecond || len(st.Ports) != 1 || st.Ports[0].Number != 3 ||
		len(st.Controllers) != 1 || len(st.GPUs) != 2 {
		t.Fatalf("file then flags: %+v", st)
	}
	st, err = loadArgs(t, "--config", file, "--port", "5=lo")
	if err != nil || len(st.Ports) != 1 || st.Ports[0].Number != 5 {
		t.Fatalf("--port replaces the file's ports: %+v, %v", st, err)
	}
}

// TestConfigMistakes: every mistake is a one-line configuration error that
// names what is wrong.
func TestConfigMistakes(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--datapath-id", "0"}, "datapath id"},
		{[]string{"--datapath-id", "0x"}, "datapath id"},
		{[]string{"--datapath-id", "18446744073709551616"}, "datapath id"},
		{[]string{"--port", "1=no-such-if0"}, "unknown interface \"no-such-if0\""},
		{[]string{"--port", "1=lo", "--port", "1=lo"}, "port number 1 given twice"},
		{[]string{"--port", "0=lo"}, "port numbers are 1.."},
		{[]string{"--port", "lo"}, "want N=IFNAME"},
		{[]string{"--controller", "ptcp:6653"}, "want tcp:HOST"},
		{[]string{"--controller", "tls:1.2.3.4:6653"}, "needs tls.private_key"},
		{[]string{"--listen", "ptls:6653", "--tls-private-key", "k", "--tls-certificate", "c"}, "needs tls.ca_cert"},
		{[]string{"--controller", "ssl:1.2.3.4", "--tls-private-key", write("k.pem", "x"), "--tls-certificate", write("c.pem", "x"), "--tls-ca-cert", "ca"}, "tls: certificate"},
		{[]string{"--listen", "tcp:1.2.3.4"}, "want ptcp:PORT"},
		{[]string{"--fail-mode", "open"}, "fail mode"},
		{[]string{"--backend", "tpu"}, "backend \"tpu\""},
		{[]string{"--tables", "0"}, "tables 0"},
		{[]string{"--max-delay", "-1s"}, "max delay"},
		{[]string{"--min-batch", "0"}, "min batch"},
		{[]string{"--rx-queues", "0"}, "rx queues 0: want 1..64"},
		{[]string{"--rx-queues", "65"}, "rx queues 65: want 1..64"},
		{[]string{"--rx-block-size", "1000"}, "rx block size 1000"},
		{[]string{"--rx-block-size", "8388608"}, "rx block size 8388608"},
		{[]string{"--config", write("rxq.yaml", "ports:\n  - {number: 1, interface: lo, rx_queues: 100}\n")}, "port 1 (lo): rx_queues 100"},
		{[]string{"--gpus", "a"}, "--gpus"},
		{[]string{"--log-level", "loud"}, "log level"},
		{[]string{"--config", filepath.Join(dir, "missing.yaml")}, "--config"},
		{[]string{"--config", write("unknown.yaml", "datapath: 1\n")}, "field datapath not found"},
		{[]string{"--config", write("bad.yaml", "tables: [\n")}, "bad.yaml"},
		{[]string{"--config", write("type.yaml", "tables: many\n")}, "type.yaml"},
	}
	for _, c := range cases {
		_, err := loadArgs(t, c.args...)
		if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: error %v, want a one-line configuration error containing %q", c.args, err, c.want)
		}
	}
}

// TestRxQueues: the top-level rx_queues (default 1), --rx-queues over it,
// and a port's own rx_queues over both.
func TestRxQueues(t *testing.T) {
	st, err := loadArgs(t, "--port", "1=lo")
	if err != nil || st.RxQueues != 1 || st.rxQueues(st.Ports[0]) != 1 {
		t.Fatalf("default rx_queues: %+v, %v", st, err)
	}
	st, err = loadArgs(t, "--rx-queues", "4", "--port", "1=lo")
	if err != nil || st.RxQueues != 4 || st.rxQueues(st.Ports[0]) != 4 {
		t.Fatalf("--rx-queues 4: %+v, %v", st, err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "q.yaml")
	if err := os.WriteFile(file, []byte("rx_queues: 2\nports:\n  - {number: 1, interface: lo, rx_queues: 8}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args       []string
		all, port1 int
	}{
		{[]string{"--config", file}, 2, 8},
		{[]string{"--config", file, "--rx-queues", "3"}, 3, 8},
		{[]string{"--config", file, "--port", "1=lo"}, 2, 2}, // --port replaces the file's ports
	} {
		st, err := loadArgs(t, c.args...)
		if err != nil || st.RxQueues != c.all || st.rxQueues(st.Ports[0]) != c.port1 {
			t.Errorf("%v: %+v, %v: want rx_queues %d, port 1 %d", c.args, st, err, c.all, c.port1)
		}
	}
}

// TestRxBlockSize: rx_block_size sets the blocks' size and keeps each
// ring at rxRingBytes; unset, afpacket's defaults (zeros).
func TestRxBlockSize(t *testing.T) {
	for _, c := range []struct {
		args        []string
		size, count int
	}{
		{nil, 0, 0},
		{[]string{"--rx-block-size", "16384"}, 16384, 512},
		{[]string{"--rx-block-size", "4194304"}, 4 << 20, 2},
	} {
		st, err := loadArgs(t, append(c.args, "--port", "1=lo")...)
		if err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		if size, n := st.rxBlocks(); size != c.size || n != c.count || (n != 0 && size*n != rxRingBytes) {
			t.Errorf("%v: %d blocks of %d, want %d of %d", c.args, n, size, c.count, c.size)
		}
	}
}

// TestFlagsOnCallersFlagSet: RegisterFlags defines the flags on the
// caller's FlagSet (beside its own, as gswitchd's --version), and Config
// returns the checked configuration they give.
func TestFlagsOnCallersFlagSet(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	f := RegisterFlags(fs)
	own := fs.Bool("own", false, "the caller's flag")
	if err := fs.Parse([]string{"--own", "--tables", "9", "--print-config"}); err != nil {
		t.Fatal(err)
	}
	c, err := f.Config()
	if err != nil || c.Tables != 9 || !*own || !f.PrintConfig() {
		t.Fatalf("Config() = %+v, %v; own %v, print-config %v", c, err, *own, f.PrintConfig())
	}
	def := DefaultConfig()
	c.Tables = def.Tables
	if !reflect.DeepEqual(c, def) {
		t.Fatalf("the flags changed more than tables:\n%+v\n%+v", c, def)
	}
	fs = flag.NewFlagSet("x", flag.ContinueOnError)
	f = RegisterFlags(fs)
	if err := fs.Parse([]string{"--max-delay", "2s"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Config(); !errors.Is(err, ErrConfig) {
		t.Fatalf("--max-delay 2s: %v, want a configuration error", err)
	}
}

// TestCalibrationBatch: --backend auto prices the device at the keys one
// batch of every receive queue brings, within MinBatch and the
// Coalescer's largest batch.
func TestCalibrationBatch(t *testing.T) {
	for _, tc := range []struct {
		c    Config
		want int
	}{
		{Config{BatchSize: 256, MinBatch: 32, RxQueues: 1, Ports: make([]PortConfig, 16)}, 4096},
		{Config{BatchSize: 256, MinBatch: 32, RxQueues: 4, Ports: make([]PortConfig, 16)}, 8192},
		{Config{BatchSize: 256, MinBatch: 2048, RxQueues: 1, Ports: make([]PortConfig, 2)}, 2048},
		{Config{BatchSize: 64, MinBatch: 32, RxQueues: 1, Ports: []PortConfig{{RxQueues: 3}, {}}}, 256},
	} {
		if got := tc.c.calibrationBatch(); got != tc.want {
			t.Errorf("%d ports, batch %d, min %d, queues %d: %d; want %d", len(tc.c.Ports), tc.c.BatchSize, tc.c.MinBatch, tc.c.RxQueues, got, tc.want)
		}
	}
}

// TestRxRing: the block ring by default; auto picks the frame ring below
// a 1 ms max_delay and the block ring from 1 ms on; block and frame are
// taken as given.
func TestRxRing(t *testing.T) {
	for _, c := range []struct {
		args []string
		want afpacket.RingMode
	}{
		{nil, afpacket.RingBlocks},
		{[]string{"--max-delay", "50us"}, afpacket.RingBlocks},
		{[]string{"--max-delay", "100us", "--rx-ring", "auto"}, afpacket.RingFrames},
		{[]string{"--max-delay", "999us", "--rx-ring", "auto"}, afpacket.RingFrames},
		{[]string{"--max-delay", "1ms", "--rx-ring", "auto"}, afpacket.RingBlocks},
		{[]string{"--max-delay", "5ms", "--rx-ring", "auto"}, afpacket.RingBlocks},
		{[]string{"--max-delay", "50us", "--rx-ring", "block"}, afpacket.RingBlocks},
		{[]string{"--max-delay", "5ms", "--rx-ring", "frame"}, afpacket.RingFrames},
	} {
		st, err := loadArgs(t, c.args...)
		if err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		if got := st.rxRing(); got != c.want {
			t.Errorf("%v: ring %v, want %v", c.args, got, c.want)
		}
	}
	if _, err := loadArgs(t, "--rx-ring", "v3"); !errors.Is(err, ErrConfig) {
		t.Errorf("--rx-ring v3: %v, want a configuration error", err)
	}
}

// TestSharedDelay: --in-flight and --batch-depth are read and bounded;
// --shared-delay splits --max-delay between the receive
// batch and the shared device batch (with a GPU; without one the receive
// batch keeps all of it); 0 leaves both at --max-delay; it must be below
// --max-delay.
func TestSharedDelay(t *testing.T) {
	us := time.Microsecond
	for _, c := range []struct {
		args            []string
		gpu             bool
		wantRx, wantDev time.Duration
	}{
		{nil, true, 100 * us, 100 * us},
		{[]string{"--max-delay", "300us", "--shared-delay", "100us"}, true, 200 * us, 100 * us},
		{[]string{"--max-delay", "300us", "--shared-delay", "100us"}, false, 300 * us, 300 * us},
	} {
		st, err := loadArgs(t, c.args...)
		if err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		if rx, dev := st.batchDelays(c.gpu); rx != c.wantRx || dev != c.wantDev {
			t.Errorf("%v, gpu %v: receive batch %v, shared batch %v; want %v, %v", c.args, c.gpu, rx, dev, c.wantRx, c.wantDev)
		}
	}
	st, err := loadArgs(t, "--in-flight", "8", "--batch-depth", "16")
	if err != nil || st.InFlight != 8 || st.BatchDepth != 16 {
		t.Errorf("--in-flight 8 --batch-depth 16: %+v, %v", st, err)
	}
	for _, bad := range [][]string{{"--shared-delay", "100us"}, {"--max-delay", "1ms", "--shared-delay", "2ms"}, {"--shared-delay", "-1us"},
		{"--in-flight", "-1"}, {"--in-flight", "65"}, {"--batch-depth", "257"}} {
		if _, err := loadArgs(t, bad...); !errors.Is(err, ErrConfig) {
			t.Errorf("%v: %v, want a configuration error", bad, err)
		}
	}
}

package agent

import (
	"bytes"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The OpenFlow limits: defaults from the embedded configuration, flags
// over them, negative values refused.
func TestOpenFlowLimitsFlags(t *testing.T) {
	st, err := loadArgs(t)
	if err != nil {
		t.Fatal(err)
	}
	want := OpenFlowConfig{EchoInterval: 5 * time.Second, EchoTimeout: 10 * time.Second, HelloTimeout: 10 * time.Second,
		WriteTimeout: 10 * time.Second, MaxOutput: 4 << 20, PacketInRate: 1000, PacketInBurst: 250}
	if st.OpenFlow != want {
		t.Errorf("defaults %+v, want %+v", st.OpenFlow, want)
	}
	st, err = loadArgs(t, "--of-write-timeout", "2s", "--of-max-output-bytes", "65536", "--controller-rate-limit", "-1",
		"--controller-burst-limit", "7", "--of-echo-interval", "1s", "--of-echo-timeout", "3s", "--of-hello-timeout", "4s")
	if err != nil {
		t.Fatal(err)
	}
	want = OpenFlowConfig{EchoInterval: time.Second, EchoTimeout: 3 * time.Second, HelloTimeout: 4 * time.Second,
		WriteTimeout: 2 * time.Second, MaxOutput: 65536, PacketInRate: -1, PacketInBurst: 7}
	if st.OpenFlow != want {
		t.Errorf("flags %+v, want %+v", st.OpenFlow, want)
	}
	o := st.OpenFlow.options()
	if o.WriteTimeout != 2*time.Second || o.MaxOutputBytes != 65536 || o.PacketInRate != -1 || o.PacketInBurst != 7 {
		t.Errorf("options %+v", o)
	}
	for _, args := range [][]string{{"--of-write-timeout", "-1s"}, {"--of-max-output-bytes", "-5"}, {"--controller-burst-limit", "-1"}} {
		if _, err := loadArgs(t, args...); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

// A plaintext listener beyond loopback is warned about in one log line.
func TestPlaintextListenerWarning(t *testing.T) {
	got := plaintextExposed([]string{"ptcp:6653", "ptcp:6654:127.0.0.1", "ptcp:6655:10.0.0.1", "ptls:6656", "tcp:10.0.0.2:6653", "ptcp:6657:[::1]"})
	if want := []string{"ptcp:6653", "ptcp:6655:10.0.0.1"}; !reflect.DeepEqual(got, want) {
		t.Errorf("exposed %v, want %v", got, want)
	}
	var buf bytes.Buffer
	warnPlaintext(slog.New(slog.NewTextHandler(&buf, nil)), []string{"ptcp:6653", "ptcp:6658"})
	if n := strings.Count(buf.String(), "\n"); n != 1 || !strings.Contains(buf.String(), "level=WARN") || !strings.Contains(buf.String(), "ptcp:6658") {
		t.Errorf("warning: %q", buf.String())
	}
	buf.Reset()
	warnPlaintext(slog.New(slog.NewTextHandler(&buf, nil)), []string{"ptcp:6653:127.0.0.1", "ptls:6654"})
	if buf.Len() != 0 {
		t.Errorf("warning for loopback and TLS listeners: %q", buf.String())
	}
}

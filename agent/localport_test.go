package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gswitch/gswitch/controlproto/openflow"
)

// The LOCAL port: --port LOCAL=IFNAME and number 0xfffffffe in the file;
// other reserved numbers stay refused.
func TestLocalPortConfig(t *testing.T) {
	st, err := loadArgs(t, "--port", "1=lo", "--port", "local=lo2")
	if err == nil || !strings.Contains(err.Error(), "lo2") {
		t.Fatalf("an unknown LOCAL interface: %+v, %v", st, err)
	}
	file := filepath.Join(t.TempDir(), "g.yaml")
	if err := os.WriteFile(file, []byte("ports:\n  - {number: 0xfffffffe, interface: lo}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err = loadArgs(t, "--config", file)
	if err != nil || len(st.Ports) != 1 || st.Ports[0].Number != openflow.PortLocal {
		t.Fatalf("number 0xfffffffe in the file: %+v, %v", st, err)
	}
	st, err = loadArgs(t, "--port", "LOCAL=lo")
	if err != nil || len(st.Ports) != 1 || st.Ports[0].Number != openflow.PortLocal {
		t.Fatalf("--port LOCAL=lo: %+v, %v", st, err)
	}
	if _, err := loadArgs(t, "--port", "4294967293=lo"); err == nil || !strings.Contains(err.Error(), "LOCAL") {
		t.Fatalf("port CONTROLLER's number accepted: %v", err)
	}
	if _, err := loadArgs(t, "--port", "LOCAL="); err == nil {
		t.Fatal("--port LOCAL= accepted")
	}
}

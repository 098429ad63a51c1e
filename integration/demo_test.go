package integration

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestDemo runs `make demo`'s script (scripts/demo.sh) with the binaries
// the tests built: the ping through gswitchd passes, gswitchctl shows the
// traffic, and the script removes its namespaces.
func TestDemo(t *testing.T) {
	needRoot(t)
	needTool(t, "ip", "iproute2")
	needTool(t, "ping", "iputils-ping")
	cmd := exec.Command("../scripts/demo.sh")
	cmd.Env = append(os.Environ(), "GSWITCHD="+gswitchdBinary(t), "GSWITCHCTL="+gswitchctlBinary(t))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/demo.sh: %v\n%s", err, out)
	}
	for _, want := range []string{"3 received", "== demo passed", "== cleaned up"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the demo's output lacks %q:\n%s", want, out)
		}
	}
	if !regexp.MustCompile(`(?m)^learned MACs: +2$`).Match(out) {
		t.Errorf("the demo's output lacks two learned MACs:\n%s", out)
	}
	ns, _ := exec.Command("ip", "netns", "list").Output()
	if strings.Contains(string(ns), "gsdemo-") {
		t.Errorf("the demo left namespaces behind:\n%s", ns)
	}
}

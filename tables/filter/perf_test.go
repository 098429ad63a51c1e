package filter

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestCompileTimeBounded: long expressions compile in bounded time (the
// optimizer emulation is iterated to a fixed point).
func TestCompileTimeBounded(t *testing.T) {
	var terms []string
	for i := 0; i < 60; i++ {
		terms = append(terms, fmt.Sprintf("(host 10.0.%d.1 and port %d)", i, 1000+i))
	}
	for _, e := range []string{strings.Join(terms, " or "), "not " + strings.Join(terms, " and not "),
		strings.Repeat("vlan and ", 20) + "ip"} {
		start := time.Now()
		if _, err := CompileOne(e, LinkEthernet, false, nil); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%d-byte expression took %v", len(e), d)
		} else {
			t.Logf("%d-byte expression: %v", len(e), d)
		}
	}
}

package p4rt

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// TestBenchP4RT runs bench p4rt small: every figure is there and sane.
func TestBenchP4RT(t *testing.T) {
	var out bytes.Buffer
	if err := Run(context.Background(), []string{"--entries", "30", "--batches", "1,10", "--samples", "5", "--json"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	var rates, lat int
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var r Result
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		switch r.Measure {
		case "write_rate":
			rates++
			if r.InsertsPerSec <= 0 || r.DeletesPerSec <= 0 || r.Entries != 30 {
				t.Errorf("write rate %+v", r)
			}
		case "visible_latency":
			lat++
			if r.Samples != 5 || r.VisibleP50us <= 0 || r.VisibleP99us < r.VisibleP50us {
				t.Errorf("latency %+v", r)
			}
		}
	}
	if rates != 4 || lat != 2 {
		t.Fatalf("%d write rates and %d latencies, want 4 and 2:\n%s", rates, lat, out.String())
	}
	if err := Run(context.Background(), []string{"--tables", "l2"}, io.Discard, io.Discard); err == nil {
		t.Error("--tables l2 accepted")
	}
}

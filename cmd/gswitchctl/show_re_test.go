package main

import (
	"strings"
	"testing"
	"text/tabwriter"

	"github.com/gswitch/gswitch/agent/ctl"
	"github.com/gswitch/gswitch/datapath/re"
)

func TestPrintRE(t *testing.T) {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	printShow(tw, ctl.REInfo{})
	printShow(tw, ctl.REInfo{Enabled: true, Port: 2, Interface: "wan0", LogBytes: 1 << 20,
		Encoder: re.EncoderCounters{BytesIn: 1000, BytesOut: 250, Saved: 750, Refs: 9, Raw: 4, Encoded: 3},
		Decoder: re.DecoderCounters{Failures: 2, Missing: 2}})
	tw.Flush()
	out := b.String()
	for _, want := range []string{"off", "port", "2 (wan0)", "every TCP segment", "saved 750 (75.0%)", "references 9", "raw sends 4", "decode failures 2", "missing 2"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

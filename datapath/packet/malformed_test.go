package packet

import (
	"testing"

	"github.com/gswitch/gswitch/datapath/packet/packettest"
	"github.com/gswitch/gswitch/tables/flow"
)

// TestMalformedCorpus: every frame of testdata/malformed.txt (runts,
// truncated headers, bogus IHL, long IPv6 extension chains, jumbo frames,
// bad VLAN stacks) parses to the reason the corpus names, and none
// crashes Parse or ParseTagged; every reason but OK has a frame.
func TestMalformedCorpus(t *testing.T) {
	corpus := packettest.Malformed(t)
	seen := map[string]bool{}
	var k flow.Key
	for _, c := range corpus {
		r := Parse(&k, c.Frame, 1)
		if r.String() != c.Reason {
			t.Errorf("%s (%d bytes): Parse says %q, the corpus %q", c.Name, len(c.Frame), r, c.Reason)
		}
		seen[r.String()] = true
		ParseTagged(&k, c.Frame, 1, 0x0064) // as if the kernel had removed a tag: must not crash
	}
	for r := Reason(1); r < NumReasons; r++ {
		if !seen[r.String()] {
			t.Errorf("no frame in the corpus for reason %q", r)
		}
	}
}

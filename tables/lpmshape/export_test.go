package lpmshape

import (
	"net/netip"

	"github.com/gswitch/gswitch/tables/flow"
)

// FormOf exposes formOf to the external tests: the form's in_port key
// (1<<32 without in_port), family-less or the prefix, and whether m is of
// the LPM form at all.
func FormOf(m *flow.Match) (anyFam bool, port uint64, pfx netip.Prefix, ok bool) {
	f, ok := lpmFormOf(m)
	return f.anyFam, f.port, f.pfx, ok
}

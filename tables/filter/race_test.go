//go:build race

package filter

// raceEnabled: the race detector slows evaluation about tenfold; the
// longest differential tests sample their corpus.
const raceEnabled = true

//go:build race

package afpacket

// raceEnabled: the race detector's instrumentation allocates where the
// code does not (an allocation test only logs then).
const raceEnabled = true

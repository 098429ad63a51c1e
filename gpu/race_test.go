//go:build race

package gpu

// raceEnabled: the race detector allocates where the code does not (its
// sync.Pool drops some of what is put back), so allocation tests only log.
const raceEnabled = true

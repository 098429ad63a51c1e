//go:build race

package kernelfib

// raceEnabled: the race detector slows the big tests about sixfold, so they
// check a sample there (and everything without it).
const raceEnabled = true

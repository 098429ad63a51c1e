//go:build !race

package afpacket

const raceEnabled = false

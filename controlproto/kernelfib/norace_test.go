//go:build !race

package kernelfib

const raceEnabled = false

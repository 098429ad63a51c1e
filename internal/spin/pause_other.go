//go:build !amd64

package spin

import "sync/atomic"

var word atomic.Uint32

// Pause loads a private word n times (none for n ≤ 0).
func Pause(n int) {
	for range n {
		word.Load()
	}
}

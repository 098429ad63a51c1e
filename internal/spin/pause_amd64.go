package spin

// Pause runs the PAUSE instruction n times (none for n ≤ 0).
//
//go:noescape
func Pause(n int)

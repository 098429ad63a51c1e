package openflow

import "time"

// tokenBucket limits a rate of events: it holds up to burst tokens, gains
// rate tokens a second, and an event takes one. The zero value with rate
// 0 allows everything. It is not safe for concurrent use: a session's
// bucket is guarded by Agent.mu.
type tokenBucket struct {
	rate, burst float64
	tokens      float64
	last        time.Time
}

// allow takes a token at now if there is one.
func (b *tokenBucket) allow(now time.Time) bool {
	if b.rate <= 0 {
		return true
	}
	if b.last.IsZero() {
		b.tokens = b.burst
	} else if d := now.Sub(b.last).Seconds(); d > 0 {
		b.tokens = min(b.burst, b.tokens+d*b.rate)
	}
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

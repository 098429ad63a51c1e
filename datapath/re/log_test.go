package re

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestLogRing logs payloads of many sizes into a small log and checks
// that every payload still logged reads back as logged, that the evicted
// ones are gone (in FIFO order), and that the log holds at most its limit;
// also with its evicted entries recycled (the decoder's log).
func TestLogRing(t *testing.T) {
	for _, recycle := range []bool{false, true} {
		testLogRing(t, recycle)
	}
}

func testLogRing(t *testing.T, recycle bool) {
	r := rand.New(rand.NewPCG(41, 42))
	const limit = 1 << 16
	l := newLog(limit)
	l.recycle = recycle
	want := map[uint64][]byte{}
	var order []uint64
	evicted := 0
	for i := 0; i < 5000; i++ {
		n := 1 + r.IntN(3000)
		if i%97 == 0 {
			n = 20000 + r.IntN(40000)
		}
		pay := randomBytes(r, n)
		id := uint64(i) + 1
		l.add(l.newEntry(id), pay, func(x *entry) {
			if order[evicted] != x.id {
				t.Fatalf("evicted %d, want the oldest %d", x.id, order[evicted])
			}
			evicted++
			delete(want, x.id)
		})
		want[id] = pay
		order = append(order, id)
		total := 0
		for id, p := range want {
			x := l.get(id)
			if x == nil || x.gone || !bytes.Equal(x.data, p) {
				t.Fatalf("after %d payloads: payload %d reads back wrong", i+1, id)
			}
			total += len(p)
		}
		if total > limit || l.byID.len() != len(want) {
			t.Fatalf("after %d payloads: %d bytes in %d payloads (index %d), limit %d", i+1, total, len(want), l.byID.len(), limit)
		}
	}
	x := &entry{id: 1 << 40}
	l.add(x, make([]byte, limit+1), nil)
	if !x.gone || l.get(x.id) != nil {
		t.Error("a payload longer than the log was logged")
	}
	l.reset(nil)
	if l.byID.len() != 0 || l.get(order[len(order)-1]) != nil {
		t.Error("reset left payloads")
	}
}

func TestCommonPrefixSuffix(t *testing.T) {
	r := rand.New(rand.NewPCG(43, 44))
	for trial := 0; trial < 3000; trial++ {
		// Up to 400 bytes (the 64-byte strides and the tails) and up to
		// 1,600 (the 512-byte strides).
		a := randomBytes(r, r.IntN([]int{40, 400, 1600}[trial%3]))
		b := append([]byte(nil), a...)
		if len(b) > 0 && r.IntN(3) > 0 {
			b[r.IntN(len(b))] ^= byte(1 + r.IntN(255))
		}
		if trial%4 < 2 {
			b = b[:r.IntN(len(b)+1)] // a prefix of a (but for the flip)
		} else {
			b = b[r.IntN(len(b)+1):] // a suffix
		}
		p, s := 0, 0
		for p < len(a) && p < len(b) && a[p] == b[p] {
			p++
		}
		if got := commonPrefix(a, b); got != p {
			t.Fatalf("commonPrefix(%x, %x) = %d, want %d", a, b, got, p)
		}
		for s < len(a) && s < len(b) && a[len(a)-1-s] == b[len(b)-1-s] {
			s++
		}
		if got := commonSuffix(a, b); got != s {
			t.Fatalf("commonSuffix(%x, %x) = %d, want %d", a, b, got, s)
		}
	}
}

package re

import (
	"encoding/binary"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"
)

// The benchmarks run frames of one TCP connection through an encoder and
// a decoder, acknowledging after every batch of 64 frames, with the
// sequence number running on (every payload is new to the log, as in a
// real transfer). Besides the wall time they report the process's CPU
// time per frame (cpu-ns/op, garbage collection included), which a
// machine shared with other work disturbs less.

// iperfStream returns the payload of frame i of a stream that repeats a
// 128 KiB random buffer (what iperf3 sends) in 1,448-byte segments.
func iperfStream() func(i int, pay []byte) {
	buf := randomBytes(rand.New(rand.NewPCG(21, 22)), 128<<10)
	return func(i int, pay []byte) {
		off := i * len(pay)
		for k := range pay {
			pay[k] = buf[(off+k)%len(buf)]
		}
	}
}

// randomStream returns random payloads.
func randomStream() func(i int, pay []byte) {
	r := rand.New(rand.NewPCG(23, 24))
	return func(i int, pay []byte) {
		for k := range pay {
			pay[k] = byte(r.Uint32())
		}
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchLink prepares 8,192 frames (payloads from fill), then runs b.N
// frames through the pair, batch by batch, with the sequence numbers
// rewritten past the prepared ones' on each pass.
func benchLink(b *testing.B, fill func(i int, pay []byte), batch bool) {
	const n = 8192
	frames := make([][]byte, n)
	pay := make([]byte, 1448)
	for i := range frames {
		fill(i, pay)
		frames[i] = tcpFrame([4]byte{10, 9, 0, 1}, [4]byte{10, 9, 0, 2}, 5201, 40000, uint32(i*1448), pay)
	}
	enc, err := NewEncoder(Config{})
	if err != nil {
		b.Fatal(err)
	}
	dec, err := NewDecoder(Config{})
	if err != nil {
		b.Fatal(err)
	}
	if err := enc.HandleControl(dec.Hello(macA, macB)); err != nil {
		b.Fatal(err)
	}
	var sc Scratch
	var res [][]byte
	var arena []byte
	decBuf := make([]byte, 2048)
	b.SetBytes(int64(len(frames[0])))
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := 0; i < b.N; {
		lo := i % n
		hi := min(lo+64, n, lo+b.N-i)
		if lo == 0 && i > 0 {
			for k, f := range frames { // a new pass: new sequence numbers
				binary.BigEndian.PutUint32(f[38:], uint32((i+k)*1448))
			}
		}
		if batch {
			res, arena = enc.EncodeBatch(&sc, frames[lo:hi], res[:0], arena[:0])
		} else {
			res, arena = res[:0], arena[:0]
			for _, f := range frames[lo:hi] {
				start := len(arena)
				arena = append(arena, make([]byte, len(f))...)
				r, _ := enc.Encode(f, arena[start:start])
				res = append(res, r)
			}
		}
		for _, f := range res {
			if _, v, err := dec.Receive(f, decBuf[:0]); v == Dropped {
				b.Fatal(err)
			}
		}
		for _, c := range dec.ControlFrames(macA, macB) {
			enc.HandleControl(c)
		}
		i += hi - lo
	}
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
	in, out := enc.Stats.BytesIn.Load(), enc.Stats.BytesOut.Load()
	b.ReportMetric(100*float64(out)/float64(in), "%wire")
}

func BenchmarkLinkIperf(b *testing.B)  { benchLink(b, iperfStream(), false) }
func BenchmarkLinkRandom(b *testing.B) { benchLink(b, randomStream(), false) }

// BenchmarkLinkIperfBatch is BenchmarkLinkIperf through EncodeBatch
// (Link.Send's path).
func BenchmarkLinkIperfBatch(b *testing.B) { benchLink(b, iperfStream(), true) }

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
	enc, dec := newPair(b, Config{})
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

// BenchmarkStream runs a TCP stream through an encoder and a decoder the
// way Link.Send and Link.Rx do (EncodeBatch in batches of 64 frames, then
// the decoder, then the acknowledgements), with new data on every pass
// over the prepared frames: "file" a file with repeats (MSS 1,460: new text
// and edited copies of earlier blocks, fileStream), "random" incompressible
// data (MSS 1,460), "iperf" iperf3's repeated 128 KiB buffer (MSS 1,448, as
// with TCP timestamps). Writing a pass's data is left out of the time and
// of the CPU time. Besides ns/op (per frame) it reports the CPU time per
// frame (cpu-ns/op) and the frames' bytes per CPU-second (MB/cpu-s), which
// a machine shared with other work disturbs less than the wall time.
func BenchmarkStream(b *testing.B) {
	for _, s := range []struct {
		name string
		mss  int
		fill func(pass int, data []byte)
	}{
		{"file", 1460, fileStream},
		{"random", 1460, func(pass int, data []byte) {
			r := rand.New(rand.NewPCG(uint64(pass), 23))
			for k := 0; k+8 <= len(data); k += 8 {
				binary.LittleEndian.PutUint64(data[k:], r.Uint64())
			}
		}},
		{"iperf", 1448, func(pass int, data []byte) {
			buf := iperfBuffer()
			off := pass * len(data) % len(buf)
			for k := 0; k < len(data); off = 0 {
				k += copy(data[k:], buf[off:])
			}
		}},
	} {
		b.Run(s.name, func(b *testing.B) { benchStream(b, s.mss, s.fill) })
	}
}

var iperfBuf []byte

// iperfBuffer is the 128 KiB random buffer iperf3 sends over and over.
func iperfBuffer() []byte {
	if iperfBuf == nil {
		iperfBuf = randomBytes(rand.New(rand.NewPCG(21, 22)), 128<<10)
	}
	return iperfBuf
}

// fileStream writes pass's bytes of a file with repeats into data: blocks
// of 256 bytes to 8 KiB, new text (words of a fixed vocabulary, lines of
// up to 80 characters) and, one block in two, a copy of an earlier block
// of the pass (up to 4 MiB back) with a few bytes changed: a document or a
// source tree sent again in a new version.
func fileStream(pass int, data []byte) {
	vocab := benchVocab()
	r := rand.New(rand.NewPCG(uint64(pass), 31))
	for at := 0; at < len(data); {
		n := min(256+r.IntN(8<<10-256), len(data)-at)
		blk := data[at : at+n]
		if back := min(at, 4<<20); back >= n && r.IntN(2) == 0 {
			copy(blk, data[at-n-r.IntN(back-n+1):])
			for e := r.IntN(4); e > 0; e-- {
				blk[r.IntN(n)] = byte('a' + r.IntN(26))
			}
		} else {
			line := 0
			for k := 0; k < n; {
				w := vocab[r.IntN(len(vocab))]
				k += copy(blk[k:], w)
				line += len(w)
				if k < n {
					if line > 72 {
						blk[k], line = '\n', 0
					} else {
						blk[k] = ' '
					}
					k++
				}
			}
		}
		at += n
	}
}

var vocab [][]byte

// benchVocab returns 4,096 words of 2 to 12 letters.
func benchVocab() [][]byte {
	if vocab == nil {
		r := rand.New(rand.NewPCG(33, 34))
		for range 4096 {
			w := make([]byte, 2+r.IntN(11))
			for k := range w {
				w[k] = byte('a' + r.IntN(26))
			}
			vocab = append(vocab, w)
		}
	}
	return vocab
}

// benchStream is BenchmarkStream's run of one stream: 8,192 frames of mss
// bytes of payload, their payloads rewritten by fill on each pass.
func benchStream(b *testing.B, mss int, fill func(pass int, data []byte)) {
	const n = 8192
	frames := make([][]byte, n)
	data := make([]byte, n*mss)
	for i := range frames {
		frames[i] = tcpFrame([4]byte{10, 9, 0, 1}, [4]byte{10, 9, 0, 2}, 5201, 40000, 0, data[:mss])
	}
	const payOff = 14 + 20 + 20
	enc, dec := newPair(b, Config{})
	var sc Scratch
	var res [][]byte
	var arena []byte
	decBuf := make([]byte, 2048)
	b.SetBytes(int64(len(frames[0])))
	b.ReportAllocs()
	b.ResetTimer()
	var cpu time.Duration
	for i := 0; i < b.N; {
		lo := i % n
		if lo == 0 { // a new pass: new data, sequence numbers running on
			b.StopTimer()
			pass := i / n
			fill(pass, data)
			for k, f := range frames {
				copy(f[payOff:], data[k*mss:(k+1)*mss])
				binary.BigEndian.PutUint32(f[38:], uint32((pass*n+k)*mss))
			}
			b.StartTimer()
		}
		hi := min(lo+64, n, lo+b.N-i)
		cpu0 := cpuTime()
		res, arena = enc.EncodeBatch(&sc, frames[lo:hi], res[:0], arena[:0])
		for _, f := range res {
			if _, v, err := dec.Receive(f, decBuf[:0]); v == Dropped {
				b.Fatal(err)
			}
		}
		for _, c := range dec.ControlFrames(macA, macB) {
			enc.HandleControl(c)
		}
		cpu += cpuTime() - cpu0
		i += hi - lo
	}
	b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(b.N)*float64(len(frames[0]))/1e6/cpu.Seconds(), "MB/cpu-s")
	in, out := enc.Stats.BytesIn.Load(), enc.Stats.BytesOut.Load()
	b.ReportMetric(100*float64(out)/float64(in), "%wire")
}

package gpfscan

import (
	"encoding/binary"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/gswitch/gswitch/datapath/pcapfile"
	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/filter"
	"github.com/gswitch/gswitch/tables/filter/filtertest"
)

// nullFilter takes batches and answers nothing: the host side of a scan
// alone (splitting, parsing, reducing into rows, handing over in order).
type nullFilter struct{ c *gpu.CPUFilter }

func (n nullFilter) Name() string { return "null" }
func (n nullFilter) NewBatch(capacity int, bits bool) (*gpu.PacketBatch, error) {
	return n.c.NewBatch(capacity, bits)
}
func (nullFilter) Submit(b *gpu.PacketBatch) error { clear(b.Counts); clear(b.Bytes); return nil }
func (nullFilter) Wait(*gpu.PacketBatch) error     { return nil }
func (nullFilter) FreeBatch(*gpu.PacketBatch)      {}
func (nullFilter) Close() error                    { return nil }

// cpuTime is the process's CPU time (user and system, every thread).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// hostCapture is a classic pcap in memory: the Ethernet test packets
// repeated, n packets cut to at most 64 to 127 bytes.
func hostCapture(b *testing.B, n int) []byte {
	var pkts []filtertest.Packet
	for _, path := range filtertest.Captures(b) {
		if link, ps := filtertest.ReadCapture(b, path); link == filter.LinkEthernet {
			pkts = append(pkts, ps...)
		}
	}
	data := make([]byte, 24, 24+n*100)
	binary.LittleEndian.PutUint32(data, 0xa1b2c3d4)
	binary.LittleEndian.PutUint32(data[20:], 1)
	for i := 0; i < n; i++ {
		p := pkts[i%len(pkts)]
		d := p.Data[:min(len(p.Data), 64+i%64)]
		var h [16]byte
		binary.LittleEndian.PutUint32(h[8:], uint32(len(d)))
		binary.LittleEndian.PutUint32(h[12:], p.Wire)
		data = append(append(data, h[:]...), d...)
	}
	return data
}

// BenchmarkScanCaptureHost: the host side of the GPU backend's scan over
// a classic pcap in memory (hostCapture, 1M packets), per worker count;
// ns/packet is per packet of the capture, Mpps-cpu per CPU-second of the
// process (the splitting, parsing, reducing into rows and handing over
// on every goroutine).
func BenchmarkScanCaptureHost(b *testing.B) {
	const n = 1 << 20
	data := hostCapture(b, n)
	prog, err := filter.Compile(filtertest.Specs(100), filter.LinkEthernet, false, nil)
	if err != nil {
		b.Fatal(err)
	}
	nf := nullFilter{gpu.NewCPUFilter(prog, 2048)}
	for _, workers := range []int{1, 2} {
		b.Run("workers="+strconv.Itoa(workers), func(b *testing.B) {
			var pool []*gpu.PacketBatch
			for range 2*workers + 2 {
				pb, _ := nf.NewBatch(65536, false)
				pool = append(pool, pb)
			}
			b.SetBytes(int64(len(data)))
			b.ResetTimer()
			c0 := cpuTime()
			for i := 0; i < b.N; i++ {
				got := 0
				err := ScanCapture(data, ScanConfig{Filter: nf, Link: pcapfile.LinkEthernet, Program: prog, Workers: workers,
					Batch: 65536, Pool: pool}, func(p *ScanPiece) error { got += p.N; return nil })
				if err != nil || got != n {
					b.Fatalf("%d packets: %v", got, err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/packet")
			b.ReportMetric(float64(b.N)*n/b.Elapsed().Seconds()/1e6, "Mpps")
			b.ReportMetric(float64(b.N)*n/(cpuTime()-c0).Seconds()/1e6, "Mpps-cpu")
		})
	}
}

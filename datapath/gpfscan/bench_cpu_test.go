package gpfscan_test

import (
	"io"
	"math/bits"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	bench "github.com/gswitch/gswitch/bench/filter"
	"github.com/gswitch/gswitch/datapath/gpfscan"
	"github.com/gswitch/gswitch/datapath/pcapfile"
	"github.com/gswitch/gswitch/tables/filter"
)

// BenchmarkScanCaptureCPU: a scan without a Filter (the CPU backend over
// a file: every packet evaluated where it lies) over the filter bench's
// synthetic capture (500,000 packets) and sets, per set size and worker
// count (and, as the baseline, pcapfile's Reader over the same bytes on
// one goroutine); Mpps-cpu is per CPU-second of the process.
func BenchmarkScanCaptureCPU(b *testing.B) {
	const n = 500000
	path := filepath.Join(b.TempDir(), "synthetic.pcap")
	if err := bench.WriteSyntheticPcap(path, n, 1); err != nil {
		b.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	for _, nf := range []int{1, 100, 1000} {
		prog, err := filter.Compile(bench.Specs(nf), filter.LinkEthernet, false, nil)
		if err != nil {
			b.Fatal(err)
		}
		// The serial pass the scan replaces: pcapfile's Reader over the
		// same bytes, Eval and the counts, one goroutine.
		b.Run("filters="+strconv.Itoa(nf)+"/reader", func(b *testing.B) {
			ev := filter.NewEvaluator(prog)
			out := make([]uint64, prog.Words())
			counts := make([]uint64, 2*nf)
			b.ResetTimer()
			c0 := cpuTime()
			for i := 0; i < b.N; i++ {
				rd, err := pcapfile.NewReaderBytes(data)
				if err != nil {
					b.Fatal(err)
				}
				got := 0
				for {
					p, err := rd.Next()
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					ev.Eval(p.Data, p.WireLen, out)
					for j, w := range out {
						for w != 0 {
							f := j*64 + bits.TrailingZeros64(w)
							w &= w - 1
							counts[f]++
							counts[nf+f] += uint64(p.WireLen)
						}
					}
					got++
				}
				if got != n {
					b.Fatalf("%d packets", got)
				}
			}
			b.ReportMetric(float64(b.N)*n/b.Elapsed().Seconds()/1e6, "Mpps")
			b.ReportMetric(float64(b.N)*n/(cpuTime()-c0).Seconds()/1e6, "Mpps-cpu")
		})
		for _, workers := range []int{1, 2} {
			b.Run("filters="+strconv.Itoa(nf)+"/workers="+strconv.Itoa(workers), func(b *testing.B) {
				b.ResetTimer()
				c0 := cpuTime()
				for i := 0; i < b.N; i++ {
					got := 0
					err := gpfscan.ScanCapture(data, gpfscan.ScanConfig{Link: pcapfile.LinkEthernet, Program: prog, Workers: workers},
						func(p *gpfscan.ScanPiece) error { got += p.N; return nil })
					if err != nil || got != n {
						b.Fatalf("%d packets: %v", got, err)
					}
				}
				b.ReportMetric(float64(b.N)*n/b.Elapsed().Seconds()/1e6, "Mpps")
				b.ReportMetric(float64(b.N)*n/(cpuTime()-c0).Seconds()/1e6, "Mpps-cpu")
			})
		}
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

package pcapfile

import (
	"os"
	"syscall"
	"testing"
	"time"
)

func cpuT() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestCCRead(t *testing.T) {
	for _, f := range []string{"/tmp/cc/syn300k.pcapng", "/tmp/cc/syn300k.pcap"} {
		for _, mode := range []string{"open", "readfile", "warm", "populate"} {
			var best time.Duration = 1 << 62
			var warm []byte
			for i := 0; i < 7; i++ {
				c0 := cpuT()
				var r *Reader
				if mode == "open" {
					r, _ = Open(f)
				} else if mode == "populate" {
					fd, _ := os.Open(f)
					st, _ := fd.Stat()
					b, _ := syscall.Mmap(int(fd.Fd()), 0, int(st.Size()), syscall.PROT_READ, syscall.MAP_SHARED|syscall.MAP_POPULATE)
					fd.Close()
					r, _ = NewReaderBytes(b)
					r.closer = func() error { return syscall.Munmap(b) }
				} else if mode == "warm" {
					if warm == nil {
						warm, _ = os.ReadFile(f)
					}
					c0 = cpuT()
					r, _ = NewReaderBytes(warm)
				} else {
					b, _ := os.ReadFile(f)
					r, _ = NewReaderBytes(b)
				}
				n := 0
				for {
					if _, err := r.Next(); err != nil {
						break
					}
					n++
				}
				r.Close()
				if d := cpuT() - c0; d < best {
					best = d
				}
			}
			t.Logf("%s %s: %.1f ns/packet CPU (best of 7)", f, mode, float64(best.Nanoseconds())/300000)
		}
	}
}

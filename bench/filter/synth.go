package filter

import (
	"encoding/binary"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
)

// synthChunks is the number of parts WriteSyntheticPcap generates apart
// (each with its own seeded generator), so that the capture does not
// depend on the number of CPUs.
const synthChunks = 64

// WriteSyntheticPcap writes a classic pcap (microsecond timestamps,
// EN10MB) of n frames of the kinds WriteSynthetic makes, generated on
// every CPU: part i of synthChunks from the seed (seed, i).
func WriteSyntheticPcap(path string, n int, seed uint64) error {
	parts := make([][]byte, synthChunks)
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(1, numCPU()))
	for i := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			r := rand.New(rand.NewPCG(seed, 7+uint64(i)))
			lo, hi := i*n/synthChunks, (i+1)*n/synthChunks
			buf := make([]byte, 0, (hi-lo)*96)
			for k := lo; k < hi; k++ {
				fr := synthFrame(r)
				var h [16]byte
				binary.LittleEndian.PutUint32(h[0:], uint32(k/1000000))
				binary.LittleEndian.PutUint32(h[4:], uint32(k%1000000))
				binary.LittleEndian.PutUint32(h[8:], uint32(len(fr)))
				binary.LittleEndian.PutUint32(h[12:], uint32(len(fr)))
				buf = append(append(buf, h[:]...), fr...)
			}
			parts[i] = buf
		}()
	}
	wg.Wait()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	var hdr [24]byte
	binary.LittleEndian.PutUint32(hdr[0:], 0xa1b2c3d4)
	binary.LittleEndian.PutUint16(hdr[4:], 2)
	binary.LittleEndian.PutUint16(hdr[6:], 4)
	binary.LittleEndian.PutUint32(hdr[16:], 65535)
	binary.LittleEndian.PutUint32(hdr[20:], 1) // EN10MB
	if _, err := f.Write(hdr[:]); err != nil {
		f.Close()
		return err
	}
	for _, p := range parts {
		if _, err := f.Write(p); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

func numCPU() int { return runtime.GOMAXPROCS(0) }

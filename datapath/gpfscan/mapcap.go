package gpfscan

import (
	"fmt"
	"os"
	"sync"
	"syscall"
)

// MapCapture maps a capture file read-only and fills the mapping's page
// tables from the page cache on workers goroutines, each over its part of
// the file (MADV_POPULATE_READ, then a read of a byte per page, which
// faults in what the advice left out, in parallel): a scan's single
// splitter then finds every page mapped (not for a file larger than half
// the memory: it is faulted in as the scan reaches it). The caller calls
// unmap when done with the bytes.
func MapCapture(path string, workers int) (data []byte, unmap func() error, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if st.Size() == 0 {
		return nil, func() error { return nil }, nil
	}
	if st.Size() != int64(int(st.Size())) {
		return nil, nil, fmt.Errorf("%s: too large to map", path)
	}
	data, err = syscall.Mmap(int(f.Fd()), 0, int(st.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: mmap: %w", path, err)
	}
	// A file larger than half the memory is not faulted in ahead: its
	// first pages would be gone again before the scan reached them.
	var si syscall.Sysinfo_t
	if syscall.Sysinfo(&si) == nil && uint64(len(data)) > uint64(si.Totalram)*uint64(si.Unit)/2 {
		return data, func() error { return syscall.Munmap(data) }, nil
	}
	const madvPopulateRead = 22
	workers = max(workers, 1)
	part := (len(data)/workers + 4095) &^ 4095
	var wg sync.WaitGroup
	sink := make([]byte, workers+1)
	for i, lo := 0, 0; lo < len(data); i, lo = i+1, lo+part {
		wg.Add(1)
		go func(i int, b []byte) {
			defer wg.Done()
			_ = syscall.Madvise(b, madvPopulateRead)
			var x byte
			for j := 0; j < len(b); j += 4096 {
				x ^= b[j]
			}
			sink[i] = x
		}(i, data[lo:min(lo+part, len(data))])
	}
	wg.Wait()
	return data, func() error { return syscall.Munmap(data) }, nil
}

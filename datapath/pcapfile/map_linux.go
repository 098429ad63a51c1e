//go:build linux

package pcapfile

import (
	"os"
	"syscall"
)

// mapFile maps the first size bytes of f read-only, with the kernel told
// to read ahead for a sequential pass.
func mapFile(f *os.File, size int) ([]byte, func() error, error) {
	b, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	_ = syscall.Madvise(b, syscall.MADV_SEQUENTIAL)
	return b, func() error { return syscall.Munmap(b) }, nil
}

//go:build !linux

package pcapfile

import "os"

// mapFile is not supported here: Open reads the file as a stream.
func mapFile(f *os.File, size int) ([]byte, func() error, error) {
	return nil, nil, errNoMap
}

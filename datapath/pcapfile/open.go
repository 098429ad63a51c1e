package pcapfile

import (
	"errors"
	"os"
)

// Open opens a capture file for reading. A regular file is mapped into
// memory where the system allows it (Linux) and parsed in place, as by
// NewReaderBytes: no read calls, no copy and no allocation per packet,
// and each Packet's Data stays valid until Close (Persistent is true). A
// file that cannot be mapped (a pipe, a device, another system, an empty
// file) is read as a stream, as by NewReader. Close releases either.
//
// A mapped file must not shrink while it is read: a page past its new
// end faults. Read a capture that another program may still truncate
// with NewReader.
func Open(path string) (*Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Size() > 0 && int64(int(st.Size())) == st.Size() {
		if b, unmap, err := mapFile(f, int(st.Size())); err == nil {
			f.Close()
			r, err := NewReaderBytes(b)
			if err != nil {
				unmap()
				return nil, err
			}
			r.closer = unmap
			return r, nil
		}
	}
	r, err := NewReader(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	r.closer = f.Close
	return r, nil
}

var errNoMap = errors.New("pcapfile: mapping not supported")

//go:build cuda

package gpu

/*
#cgo LDFLAGS: -lcuda
#include <cuda.h>
*/
import "C"

import (
	"fmt"
	"unsafe"

	"gorgonia.org/cu"
)

// hostBuf is page-locked host memory (cuMemAllocHost), the staging the
// asynchronous copies need: gorgonia.org/cu v0.9.6 frees such memory but has
// no call to allocate it.
type hostBuf struct {
	p unsafe.Pointer
	n int64 // bytes
}

func allocHost(n int64) (hostBuf, error) {
	var p unsafe.Pointer
	if r := C.cuMemAllocHost(&p, C.size_t(n)); r != C.CUDA_SUCCESS {
		return hostBuf{}, fmt.Errorf("gpu: cuda: allocating %d bytes of pinned host memory: error %d", n, int(r))
	}
	return hostBuf{p, n}, nil
}

func (h *hostBuf) free() {
	if h.n != 0 {
		cu.MemFreeHost(h.p)
		*h = hostBuf{}
	}
}

// bytes views the first n bytes of h.
func (h *hostBuf) bytes(n int64) []byte {
	return unsafe.Slice((*byte)(h.p), n)
}

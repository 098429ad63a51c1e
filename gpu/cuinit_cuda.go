//go:build cuda

package gpu

/*
#cgo LDFLAGS: -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#include <cuda.h>

// gorgonia.org/cu calls cuInit in its package init and exits the process
// when it fails: a cuda binary on a host whose driver is installed but whose
// GPUs are hidden (CUDA_VISIBLE_DEVICES=""), broken or absent would die
// before it could fall back to the CPU. This definition of cuInit, in the
// executable, takes precedence over the driver library's for every call in
// the binary (the dynamic linker's symbol interposition): it calls the
// driver's own cuInit (the next definition, found with RTLD_NEXT), keeps its
// result for NewCUDA to report, and tells the caller it succeeded. Every
// later driver call of an uninitialised driver fails with
// CUDA_ERROR_NOT_INITIALIZED, so nothing is done on a device that is not
// there; NewCUDA checks gs_init_result first.
static CUresult gs_init_result = CUDA_ERROR_NOT_INITIALIZED;
static int gs_init_called;

CUresult CUDAAPI cuInit(unsigned int flags)
{
	typedef CUresult (*initfn)(unsigned int);
	initfn real = (initfn)dlsym(RTLD_NEXT, "cuInit");
	gs_init_called = 1;
	gs_init_result = real ? real(flags) : CUDA_ERROR_NOT_INITIALIZED;
	return CUDA_SUCCESS;
}

static CUresult gs_init_status(void)
{
	if (!gs_init_called)
		cuInit(0);
	return gs_init_result;
}
*/
import "C"

import "fmt"

// driverInit returns the driver initialisation's error, nil when the driver
// is usable.
func driverInit() error {
	if r := C.gs_init_status(); !cuOK(r) {
		return fmt.Errorf("gpu: cuda: the driver did not initialise: %v", cuErr(r))
	}
	return nil
}

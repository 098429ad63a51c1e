// GAMT lookups and the bubble scatter, for gswitch's gpu package.
//
// ABI (kept simple; see gpu/cuda.go): every lookup kernel (these and
// flow.cu's) takes (img, desc, nl, keys, out, n, stride); stride is the
// distance between key columns of the flow kernel's structure of arrays,
// unused here. Every region of a table's image, meta
// included, is laid end to end in ONE device buffer of 32-bit words. A
// table also has a small descriptor buffer of 3 words per level:
// base (word offset of the level in the image), stride s, off (the first
// address bit the level consumes). Entries are inf<<8 | jump; jump == 0 is a
// leaf holding the next hop (0 = none), otherwise a pointer to node inf of
// level jump. Images are checked on the host (bounds of every pointer)
// before they or their bubbles reach the device.
//
// Build (see the Makefile's kernels target):
//   nvcc -ptx -arch=sm_90      -o gamt_sm90.ptx      gamt.cu
//   nvcc -ptx -arch=compute_80 -o gamt_compute80.ptx gamt.cu
#include <stdint.h>

#include "layout.h" // generated from the Go constants (go generate ./kernels)

struct level {
	uint32_t base, stride, off;
};

// load_levels copies the level descriptors into shared memory.
__device__ __forceinline__ void load_levels(level* lv, const uint32_t* __restrict__ desc, int nlevels)
{
	for (int i = threadIdx.x; i < nlevels; i += blockDim.x) {
		lv[i].base = desc[GAMT_LEVEL_DESC * i + GAMT_LD_BASE];
		lv[i].stride = desc[GAMT_LEVEL_DESC * i + GAMT_LD_STRIDE];
		lv[i].off = desc[GAMT_LEVEL_DESC * i + GAMT_LD_OFF];
	}
	__syncthreads();
}

// gamt_lookup4: out[i] = next hop of the longest prefix matching the IPv4
// address addrs[i] (0: none). One thread per address, grid-stride loop.
extern "C" __global__ void gamt_lookup4(const uint32_t* __restrict__ img, const uint32_t* __restrict__ desc,
					int nlevels, const uint32_t* __restrict__ addrs, uint32_t* __restrict__ out, int n, int stride)
{
	__shared__ level lv[GAMT_MAX_LEVELS];
	load_levels(lv, desc, nlevels);
	const uint32_t base0 = lv[0].base, sh0 = 32 - lv[0].stride;
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
		uint32_t a = addrs[i];
		uint32_t e = __ldg(&img[base0 + (a >> sh0)]);
		while (e & GAMT_JUMP_MASK) {
			const level l = lv[(e & GAMT_JUMP_MASK) & (GAMT_MAX_LEVELS - 1)];
			uint32_t chunk = (a << l.off) >> (32 - l.stride);
			e = __ldg(&img[l.base + (((e >> GAMT_JUMP_BITS) << l.stride) | chunk)]);
		}
		out[i] = e >> GAMT_JUMP_BITS;
	}
}

// chunk6 returns the s bits of the 128-bit address (hi, lo) from bit off.
__device__ __forceinline__ uint32_t chunk6(uint64_t hi, uint64_t lo, uint32_t off, uint32_t s)
{
	uint64_t w;
	if (off == 0)
		w = hi;
	else if (off < 64)
		w = (hi << off) | (lo >> (64 - off));
	else
		w = lo << (off - 64);
	return (uint32_t)(w >> (64 - s));
}

// gamt_lookup6: IPv6, full 128-bit addresses, addrs[2i] = high half,
// addrs[2i+1] = low half (the layout of Go's []lpm.Addr6).
extern "C" __global__ void gamt_lookup6(const uint32_t* __restrict__ img, const uint32_t* __restrict__ desc,
					int nlevels, const ulonglong2* __restrict__ addrs, uint32_t* __restrict__ out, int n, int stride)
{
	__shared__ level lv[GAMT_MAX_LEVELS];
	load_levels(lv, desc, nlevels);
	const uint32_t base0 = lv[0].base, sh0 = 64 - lv[0].stride;
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
		ulonglong2 a = addrs[i];
		uint32_t e = __ldg(&img[base0 + (uint32_t)(a.x >> sh0)]);
		while (e & GAMT_JUMP_MASK) {
			const level l = lv[(e & GAMT_JUMP_MASK) & (GAMT_MAX_LEVELS - 1)];
			e = __ldg(&img[l.base + (((e >> GAMT_JUMP_BITS) << l.stride) | chunk6(a.x, a.y, l.off, l.stride))]);
		}
		out[i] = e >> GAMT_JUMP_BITS;
	}
}

// bubble_scatter writes img[offs[i]] = vals[i]: the bubbles of one update,
// offsets global (region base + offset) and unique, so order is irrelevant.
extern "C" __global__ void bubble_scatter(uint32_t* __restrict__ img, const uint32_t* __restrict__ offs,
					  const uint32_t* __restrict__ vals, int n)
{
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
		img[offs[i]] = vals[i];
}

// gswitch_fault stops the context as a device fault does (a trap: every
// later call of the context fails). Only the tests of the fall-back to the
// CPU launch it.
extern "C" __global__ void gswitch_fault()
{
	asm volatile("trap;");
}

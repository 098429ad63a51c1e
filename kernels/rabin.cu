// Rabin fingerprint markers over batches of payloads, for redundancy
// elimination and content-defined chunking (package tables/rabin has the
// definitions and the CPU twin, Marker.Bitmap, whose answers these equal bit
// for bit).
//
// ABI: rabin_markers(buf, offs, lens, n, tabs, w, shift, mask_lo, mask_hi, bitmap)
//   buf     the indexed compact buffer: payload k's bytes at buf[offs[k]],
//           offs[k] a multiple of 32 (so that no two payloads share a word of
//           the bitmap), lens[k] bytes;
//   tabs    512 64-bit words: out[256] then mod[256] (rabin.Tables);
//   w       the window; shift = the polynomial's degree - 8;
//   mask    the marker mask, as two 32-bit halves;
//   bitmap  one bit per byte of buf: bit (p & 31) of word p >> 5 is set when
//           byte p ends a window (p - offs[k] >= w-1) whose fingerprint has
//           the mask's bits zero. A payload's thread writes every word that
//           covers its bytes, whole (zero bits past its end).
// One thread per payload (the host sorts payloads roughly by length so that
// the threads of a warp finish together); the tables in shared memory; the
// payload read 16 bytes at a time.
//
// Build: nvcc -ptx -arch=sm_90 -o rabin_sm90.ptx rabin.cu (and compute_80).
#include <stdint.h>

extern "C" __global__ void rabin_markers(const uint8_t* __restrict__ buf, const uint32_t* __restrict__ offs,
					 const uint32_t* __restrict__ lens, int n, const uint64_t* __restrict__ tabs,
					 int w, int shift, uint32_t mask_lo, uint32_t mask_hi, uint32_t* __restrict__ bitmap)
{
	__shared__ uint64_t out[256], mod[256];
	for (int i = threadIdx.x; i < 256; i += blockDim.x) {
		out[i] = tabs[i];
		mod[i] = tabs[256 + i];
	}
	__syncthreads();
	const uint64_t mask = (uint64_t)mask_hi << 32 | mask_lo;
	for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x) {
		const uint32_t o = offs[k], len = lens[k];
		const uint8_t* p = buf + o;
		uint64_t f = 0;
		uint32_t acc = 0;
		uint32_t i = 0;
		for (; i + 16 <= len; i += 16) {
			const uint4 v = *reinterpret_cast<const uint4*>(p + i);
			const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
			for (int j = 0; j < 16; j++) {
				const uint32_t b = (words[j >> 2] >> (8 * (j & 3))) & 0xff;
				const uint32_t at = i + j;
				f = (f << 8 | b) ^ mod[f >> shift];
				if (at + 1 >= (uint32_t)w) {
					if ((f & mask) == 0)
						acc |= 1u << (at & 31);
					f ^= out[__ldg(p + at + 1 - w)];
				}
				if ((at & 31) == 31) {
					bitmap[(o + at) >> 5] = acc;
					acc = 0;
				}
			}
		}
		for (; i < len; i++) {
			const uint32_t b = __ldg(p + i);
			f = (f << 8 | b) ^ mod[f >> shift];
			if (i + 1 >= (uint32_t)w) {
				if ((f & mask) == 0)
					acc |= 1u << (i & 31);
				f ^= out[__ldg(p + i + 1 - w)];
			}
			if ((i & 31) == 31) {
				bitmap[(o + i) >> 5] = acc;
				acc = 0;
			}
		}
		if (len & 31)
			bitmap[(o + len - 1) >> 5] = acc;
	}
}

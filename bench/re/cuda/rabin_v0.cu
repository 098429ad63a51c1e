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
// rabin_markers_w16, _w32, _w48 and _w64 take the same arguments and need w
// to be 16, 32, 48 or 64: the window is a compile-time constant there, so
// the byte that leaves the window comes from the last w/16+1 16-byte blocks
// the thread loaded, kept in registers, instead of a byte load from memory
// per byte (the generic kernel's).
// One thread per payload (the host sorts payloads roughly by length so that
// the threads of a warp finish together); the tables in shared memory; the
// payload read 16 bytes at a time.
//
// Build: nvcc -ptx -arch=sm_90 -o rabin_sm90.ptx rabin.cu (and compute_80).
#include <stdint.h>

__device__ __forceinline__ uint32_t byte_of(const uint4 v, int j)
{
	const uint32_t x = j < 4 ? v.x : j < 8 ? v.y : j < 12 ? v.z : v.w;
	return (x >> (8 * (j & 3))) & 0xff;
}

// tail finishes a payload from byte i on, one byte at a time (the generic
// path, and the last len % 16 bytes of the fixed-window kernels).
__device__ __forceinline__ void tail(const uint8_t* p, uint32_t o, uint32_t len, uint32_t i, uint64_t f,
				     uint32_t acc, const uint64_t* out, const uint64_t* mod, int w, int shift,
				     uint64_t mask, uint32_t* bitmap)
{
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

__device__ __forceinline__ void load_tables(const uint64_t* __restrict__ tabs, uint64_t* out, uint64_t* mod)
{
	for (int i = threadIdx.x; i < 256; i += blockDim.x) {
		out[i] = tabs[i];
		mod[i] = tabs[256 + i];
	}
	__syncthreads();
}

extern "C" __global__ void rabin_markers_generic_v0(const uint8_t* __restrict__ buf, const uint32_t* __restrict__ offs,
					 const uint32_t* __restrict__ lens, int n, const uint64_t* __restrict__ tabs,
					 int w, int shift, uint32_t mask_lo, uint32_t mask_hi, uint32_t* __restrict__ bitmap)
{
	__shared__ uint64_t out[256], mod[256];
	load_tables(tabs, out, mod);
	const uint64_t mask = (uint64_t)mask_hi << 32 | mask_lo;
	for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x) {
		const uint32_t o = offs[k], len = lens[k];
		const uint8_t* p = buf + o;
		uint64_t f = 0;
		uint32_t acc = 0;
		uint32_t i = 0;
		for (; i + 16 <= len; i += 16) {
			const uint4 v = *reinterpret_cast<const uint4*>(p + i);
#pragma unroll
			for (int j = 0; j < 16; j++) {
				const uint32_t b = byte_of(v, j);
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
		tail(p, o, len, i, f, acc, out, mod, w, shift, mask, bitmap);
	}
}

// markers_fixed is rabin_markers for a window of W bytes known at compile
// time: h[H-1] is the block being hashed, h[H-1-k] the block k before it.
template <int W>
__device__ __forceinline__ void markers_fixed(const uint8_t* __restrict__ buf, const uint32_t* __restrict__ offs,
					      const uint32_t* __restrict__ lens, int n,
					      const uint64_t* __restrict__ tabs, int shift, uint32_t mask_lo,
					      uint32_t mask_hi, uint32_t* __restrict__ bitmap)
{
	constexpr int H = (W + 15) / 16 + 1;
	__shared__ uint64_t out[256], mod[256];
	load_tables(tabs, out, mod);
	const uint64_t mask = (uint64_t)mask_hi << 32 | mask_lo;
	for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x) {
		const uint32_t o = offs[k], len = lens[k];
		const uint8_t* p = buf + o;
		uint4 h[H];
#pragma unroll
		for (int q = 0; q < H; q++)
			h[q] = make_uint4(0, 0, 0, 0);
		uint64_t f = 0;
		uint32_t acc = 0;
		uint32_t i = 0;
		for (; i + 16 <= len; i += 16) {
#pragma unroll
			for (int q = 0; q + 1 < H; q++)
				h[q] = h[q + 1];
			h[H - 1] = *reinterpret_cast<const uint4*>(p + i);
			const bool warm = i + 16 >= (uint32_t)W; // some window ends in this block
#pragma unroll
			for (int j = 0; j < 16; j++) {
				const uint32_t at = i + j;
				f = (f << 8 | byte_of(h[H - 1], j)) ^ mod[f >> shift];
				// The byte leaving: at + 1 - W, relative to i a constant.
				const int r = j + 1 - W;                      // < 16, >= 1 - W
				const int blk = (r + 16 * H) / 16 - H;        // floor(r / 16)
				const int byt = r - 16 * blk;
				if (warm && at + 1 >= (uint32_t)W) {
					if ((f & mask) == 0)
						acc |= 1u << (at & 31);
					f ^= out[byte_of(h[H - 1 + blk], byt)];
				}
				if (j == 15 && (i & 16)) {
					bitmap[(o + at) >> 5] = acc;
					acc = 0;
				}
			}
		}
		tail(p, o, len, i, f, acc, out, mod, W, shift, mask, bitmap);
	}
}

#define FIXED(W)                                                                                                  \
	extern "C" __global__ void rabin_markers_w##W(const uint8_t* __restrict__ buf,                              \
						      const uint32_t* __restrict__ offs,                            \
						      const uint32_t* __restrict__ lens, int n,                     \
						      const uint64_t* __restrict__ tabs, int w, int shift,          \
						      uint32_t mask_lo, uint32_t mask_hi,                           \
						      uint32_t* __restrict__ bitmap)                                \
	{                                                                                                         \
		(void)w;                                                                                          \
		markers_fixed<W>(buf, offs, lens, n, tabs, shift, mask_lo, mask_hi, bitmap);                     \
	}
FIXED(16)
FIXED(32)
FIXED(48)
FIXED(64)

// Rabin fingerprint markers over batches of payloads, for redundancy
// elimination and content-defined chunking (package tables/rabin has the
// definitions and the CPU twin, Marker.Bitmap, whose answers these equal bit
// for bit).
//
// ABI: rabin_markers(buf, offs, lens, n, tabs, w, shift, mask_lo, mask_hi, bitmap, parts)
//   buf     the indexed compact buffer: payload k's bytes at buf[offs[k]],
//           offs[k] a multiple of 32 (so that no two payloads share a word of
//           the bitmap), lens[k] bytes; the buffer is readable up to the
//           next multiple of 32 past the last payload (the bytes there are
//           read, hashed after the payload's last position, and never
//           change a result);
//   tabs    512 64-bit words: out[256] then mod[256] (rabin.Tables);
//   w       the window; shift = the polynomial's degree - 8;
//   mask    the marker mask, as two 32-bit halves;
//   bitmap  one bit per byte of buf: bit (p & 31) of word p >> 5 is set when
//           byte p ends a window (p - offs[k] >= w-1) whose fingerprint has
//           the mask's bits zero. Every word that covers a payload's bytes is
//           written whole (zero bits past its end), by one thread;
//   parts   threads per payload (1..64; the fixed-window kernels only, the
//           generic one takes 1): payload k is cut into parts segments of
//           per = max(64, roundup32(ceil(len / parts))) bytes; thread
//           k * parts + j hashes segment j, starting 32 * ceil((w-1)/32)
//           bytes early (the warm-up: every window ending in the segment is
//           then whole), and writes the bitmap words of its segment only.
// rabin_markers_w16, _w32, _w48 and _w64 need w to be 16, 32, 48 or 64:
// the window is a compile-time constant there, so the byte that leaves the
// window comes from the last ceil((w-1)/32) 32-byte blocks the thread
// loaded, kept in registers, not from a second load per byte (the generic
// kernel's); each thread loads its next 32-byte block (two 16-byte loads)
// before it hashes the current one, and writes one bitmap word per block.
// The tables sit in shared memory (a warp's lookups are random: the
// constant cache would serialise them).
//
// Build: nvcc -ptx -arch=sm_90 -o rabin_sm90.ptx rabin.cu (and compute_80).
#include <stdint.h>

#ifndef RABIN_PREFETCH
#define RABIN_PREFETCH 1 // 0: load the next block after hashing this one (a variant the benchmark measures)
#endif

__device__ __forceinline__ uint32_t byte_of(const uint4 v, int j)
{
	const uint32_t x = j < 4 ? v.x : j < 8 ? v.y : j < 12 ? v.z : v.w;
	return (x >> (8 * (j & 3))) & 0xff;
}

// byte32 returns byte j (0..31) of the 32-byte block a, b.
__device__ __forceinline__ uint32_t byte32(const uint4 a, const uint4 b, int j)
{
	return j < 16 ? byte_of(a, j) : byte_of(b, j - 16);
}

__device__ __forceinline__ uint4 ld16(const uint8_t* p)
{
	return __ldg(reinterpret_cast<const uint4*>(p));
}

// tail finishes a payload from byte i on, one byte at a time (the generic
// kernel's last len % 16 bytes).
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

// rabin_markers is the generic kernel: any window, a thread per payload,
// the leaving byte loaded again from the buffer.
extern "C" __global__ void rabin_markers(const uint8_t* __restrict__ buf, const uint32_t* __restrict__ offs,
					 const uint32_t* __restrict__ lens, int n, const uint64_t* __restrict__ tabs,
					 int w, int shift, uint32_t mask_lo, uint32_t mask_hi, uint32_t* __restrict__ bitmap,
					 int parts)
{
	(void)parts;
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
			const uint4 v = ld16(p + i);
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

// RABIN_MIN_SEGMENT is the shortest segment a payload is cut into: shorter
// ones would spend more on the warm-up than on their own bytes.
#define RABIN_MIN_SEGMENT 64

// markers_fixed is rabin_markers for a window of W bytes known at compile
// time, a thread per segment: pv[H-1] is the 32-byte block before the one
// being hashed (c0, c1), pv[H-1-q] the one q blocks before that; blocks
// before the segment's first are zero, and out[0] is 0, so the bytes
// before it never leave the window.
template <int W>
__device__ __forceinline__ void markers_fixed(const uint8_t* __restrict__ buf, const uint32_t* __restrict__ offs,
					      const uint32_t* __restrict__ lens, int n,
					      const uint64_t* __restrict__ tabs, int shift, uint32_t mask_lo,
					      uint32_t mask_hi, uint32_t* __restrict__ bitmap, int parts)
{
	constexpr int H = (W + 30) / 32; // ceil((W-1)/32) blocks back
	__shared__ uint64_t out[256], mod[256];
	load_tables(tabs, out, mod);
	const uint64_t mask = (uint64_t)mask_hi << 32 | mask_lo;
	const int total = n * parts;
	for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < total; t += gridDim.x * blockDim.x) {
		const int k = t / parts, part = t - k * parts;
		const uint32_t o = offs[k], len = lens[k];
		uint32_t per = ((len + parts - 1) / parts + 31) & ~31u;
		per = per < RABIN_MIN_SEGMENT ? RABIN_MIN_SEGMENT : per;
		const uint32_t start = part * per;
		if (start >= len)
			continue;
		const uint32_t end = min(len, start + per);
		const uint32_t s = start > 32 * H ? start - 32 * H : 0;
		const uint8_t* p = buf + o;
		uint4 pv[H][2];
#pragma unroll
		for (int q = 0; q < H; q++)
			pv[q][0] = pv[q][1] = make_uint4(0, 0, 0, 0);
		uint64_t f = 0;
		uint4 c0 = ld16(p + s), c1 = ld16(p + s + 16);
		for (uint32_t i = s; i < end; i += 32) {
			uint4 n0 = c0, n1 = c1;
#if RABIN_PREFETCH
			if (i + 32 < end) {
				n0 = ld16(p + i + 32);
				n1 = ld16(p + i + 48);
			}
#endif
			uint32_t acc = 0;
#pragma unroll
			for (int j = 0; j < 32; j++) {
				f = (f << 8 | byte32(c0, c1, j)) ^ mod[f >> shift];
				if ((f & mask) == 0)
					acc |= 1u << j;
				// The byte leaving: i + r, r a constant here.
				const int r = j + 1 - W;
				uint32_t ob;
				if (r >= 0) {
					ob = byte32(c0, c1, r);
				} else {
					const int blk = (r - 31) / 32; // floor(r / 32), -H..-1
					const int byt = r - 32 * blk;
					ob = byte32(pv[H + blk][0], pv[H + blk][1], byt);
				}
				f ^= out[ob];
			}
			if (i >= start) {
				uint32_t valid = ~0u;
				if (s == 0 && i < (uint32_t)(W - 1)) {
					const uint32_t sh = W - 1 - i; // positions before the first whole window
					valid = sh >= 32 ? 0 : valid << sh;
				}
				if (end - i < 32)
					valid &= (1u << (end - i)) - 1;
				bitmap[(o + i) >> 5] = acc & valid;
			}
#if !RABIN_PREFETCH
			if (i + 32 < end) {
				n0 = ld16(p + i + 32);
				n1 = ld16(p + i + 48);
			}
#endif
#pragma unroll
			for (int q = 0; q + 1 < H; q++) {
				pv[q][0] = pv[q + 1][0];
				pv[q][1] = pv[q + 1][1];
			}
			pv[H - 1][0] = c0;
			pv[H - 1][1] = c1;
			c0 = n0;
			c1 = n1;
		}
	}
}

#define FIXED(W)                                                                                                  \
	extern "C" __global__ void rabin_markers_w##W(const uint8_t* __restrict__ buf,                              \
						      const uint32_t* __restrict__ offs,                            \
						      const uint32_t* __restrict__ lens, int n,                     \
						      const uint64_t* __restrict__ tabs, int w, int shift,          \
						      uint32_t mask_lo, uint32_t mask_hi,                           \
						      uint32_t* __restrict__ bitmap, int parts)                     \
	{                                                                                                         \
		(void)w;                                                                                          \
		markers_fixed<W>(buf, offs, lens, n, tabs, shift, mask_lo, mask_hi, bitmap, parts);              \
	}
FIXED(16)
FIXED(32)
FIXED(48)
FIXED(64)

// rabin_gather copies payloads out of host memory the device reads directly
// (page-locked and mapped: a receive ring registered with cuMemHostRegister)
// into the indexed compact buffer the markers kernels read, so that the
// payloads cross PCIe once, straight from where they were received, with
// no copy on the host.
//
// ABI: rabin_gather(src, srcs, offs, lens, n, dst) (and rabin_gather16)
//   src     the mapped host memory (its device address; a multiple of 16);
//   srcs    payload k's first byte is src[srcs[k]] (any byte offset);
//   offs    its place in dst, a multiple of 32 (as rabin_markers reads it);
//   lens    its length;
//   dst     the compact buffer in device memory: bytes offs[k] .. the next
//           multiple of 32 past offs[k] + lens[k] are written, those past
//           the payload zero.
// A warp copies one payload at a time, in stretches of 32 * GATHER_U
// 16-byte words: lane l loads words l, 32 + l, ... of the stretch (every
// load of the warp one run of 512 bytes), all of them before the first use,
// then builds its 16 bytes of dst from the two source words that hold them
// (shuffles from the lanes that loaded them) shifted to the payload's
// alignment. The words are counted from the payload's first byte rounded
// down to LINE bytes: rabin_gather's LINE 128 makes each load instruction
// cover whole 128-byte lines (the first and last lines of a payload are
// partial: no word before the payload's first or after its last is read),
// rabin_gather16's LINE 16 starts at the payload's own 16-byte word, so
// that each 512-byte run straddles lines at any other alignment.
#ifndef GATHER_U
#define GATHER_U 3 // the benchmark's variants build others with -DGATHER_U=
#endif

#ifndef GATHER_LD
#define GATHER_LD 0 // 0 ld.global.nc; 1 ld.global.cs, 2 ld.global.cg: variants the benchmark builds
#endif

__device__ __forceinline__ uint4 ld16_sys(const uint8_t* p)
{
	// The mapped memory does not change during the kernel.
#if GATHER_LD == 1
	return __ldcs(reinterpret_cast<const uint4*>(p));
#elif GATHER_LD == 2
	return __ldcg(reinterpret_cast<const uint4*>(p));
#else
	return __ldg(reinterpret_cast<const uint4*>(p));
#endif
}

// shr16 returns bytes sh .. sh+15 of the 32 bytes a, b (sh 0..15 in bytes:
// q = sh / 4 words and r = 8 * (sh % 4) bits; q is the same across the warp).
__device__ __forceinline__ uint4 shr16(const uint4 a, const uint4 b, int q, int r)
{
	uint32_t v0, v1, v2, v3, v4;
	switch (q) {
	case 0: v0 = a.x, v1 = a.y, v2 = a.z, v3 = a.w, v4 = b.x; break;
	case 1: v0 = a.y, v1 = a.z, v2 = a.w, v3 = b.x, v4 = b.y; break;
	case 2: v0 = a.z, v1 = a.w, v2 = b.x, v3 = b.y, v4 = b.z; break;
	default: v0 = a.w, v1 = b.x, v2 = b.y, v3 = b.z, v4 = b.w; break;
	}
	return make_uint4(__funnelshift_r(v0, v1, r), __funnelshift_r(v1, v2, r), __funnelshift_r(v2, v3, r),
			  __funnelshift_r(v3, v4, r));
}

// keep returns the low bytes (0..4) of x that lie before the payload's end.
__device__ __forceinline__ uint32_t keep(uint32_t x, int bytes)
{
	return bytes >= 4 ? x : bytes <= 0 ? 0 : x & ((1u << (8 * bytes)) - 1);
}

__device__ __forceinline__ uint4 shfl16(const uint4 v, int lane)
{
	return make_uint4(__shfl_sync(0xffffffffu, v.x, lane), __shfl_sync(0xffffffffu, v.y, lane),
			  __shfl_sync(0xffffffffu, v.z, lane), __shfl_sync(0xffffffffu, v.w, lane));
}

// word returns word rel (0 .. 32 * (GATHER_U + 1) - 1) of the stretch, held
// by lane rel % 32 in w[rel / 32]; rel / 32 is u or u + 1 (every lane
// shuffles both).
__device__ __forceinline__ uint4 word(const uint4 (&w)[GATHER_U + 1], int u, int rel)
{
	uint4 a = make_uint4(0, 0, 0, 0), b = make_uint4(0, 0, 0, 0);
#pragma unroll
	for (int v = 0; v < GATHER_U; v++) {
		if (v == u) {
			a = shfl16(w[v], rel & 31);
			b = shfl16(w[v + 1], rel & 31);
		}
	}
	return (rel >> 5) == u ? a : b;
}

template <int LINE>
__device__ __forceinline__ void gather(const uint8_t* __restrict__ src, const uint32_t* __restrict__ srcs,
				       const uint32_t* __restrict__ offs, const uint32_t* __restrict__ lens, int n,
				       uint8_t* __restrict__ dst)
{
	const int lane = threadIdx.x & 31;
	const int warps = gridDim.x * (blockDim.x >> 5);
	for (int k = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); k < n; k += warps) {
		const uint32_t s = srcs[k], o = offs[k], len = lens[k];
		const uint8_t* a = src + (s & ~(uint32_t)(LINE - 1)); // the line holding the first byte
		const int sh = s & (LINE - 1);
		const int first = sh >> 4;                    // the word of a holding the first byte
		const int q = (sh & 15) >> 2, r = 8 * (sh & 3); // the shift inside a word
		const int words = (sh + len + 15) >> 4;      // words of a up to the payload's last byte
		const int chunks = ((len + 31) >> 5) * 2;    // 16-byte stores, to the next multiple of 32
		for (int c0 = 0; c0 < chunks; c0 += 32 * GATHER_U) {
			uint4 w[GATHER_U + 1];
#pragma unroll
			for (int u = 0; u <= GATHER_U; u++) {
				// Word c0 + 32u + lane; the last row only as far as
				// the stretch's last chunk reaches (first + 1 words).
				const int i = c0 + 32 * u + lane;
				const bool need = i >= first && i < words && (u < GATHER_U || lane <= first);
				w[u] = need ? ld16_sys(a + 16 * i) : make_uint4(0, 0, 0, 0);
			}
#pragma unroll
			for (int u = 0; u < GATHER_U; u++) {
				const int c = c0 + 32 * u + lane;
				// Chunk c is bytes sh + 16c .. of a: words first + c and the next.
				const int rel = 32 * u + lane + first;
				const uint4 lo = word(w, u, rel), hi = word(w, u, rel + 1);
				if (c >= chunks)
					continue;
				uint4 v = shr16(lo, hi, q, r);
				const int left = (int)len - 16 * c; // payload bytes from this chunk on
				if (left < 16) {
					v.x = keep(v.x, left);
					v.y = keep(v.y, left - 4);
					v.z = keep(v.z, left - 8);
					v.w = keep(v.w, left - 12);
				}
				*reinterpret_cast<uint4*>(dst + o + 16 * c) = v;
			}
		}
	}
}

extern "C" __global__ void rabin_gather(const uint8_t* __restrict__ src, const uint32_t* __restrict__ srcs,
					const uint32_t* __restrict__ offs, const uint32_t* __restrict__ lens, int n,
					uint8_t* __restrict__ dst)
{
	gather<128>(src, srcs, offs, lens, n, dst);
}

extern "C" __global__ void rabin_gather16(const uint8_t* __restrict__ src, const uint32_t* __restrict__ srcs,
					  const uint32_t* __restrict__ offs, const uint32_t* __restrict__ lens, int n,
					  uint8_t* __restrict__ dst)
{
	gather<16>(src, srcs, offs, lens, n, dst);
}

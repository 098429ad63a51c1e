// Flow classification (package flow's device image), for gswitch's gpu
// package: linear search, tuple-space search over cuckoo tables, Bloom
// search and merged tuple search (TupleMerge: entries carry their own mask), bit for bit what flow.View.Lookup computes (tables/flow/view.go).
//
// ABI (like gamt.cu): every region of a table's image (header, seeds,
// classes, order, entries, bloom) is laid end to end in ONE device buffer of
// 32-bit words; a descriptor of FLOW_DESC words gives each region's base word
// and length, the algorithm, the projection width P, the hash families K and
// the slot count (class slots, or linear rule slots), all fixed for a
// generation and checked on the host (flow.NewView). The header's count word
// is read in place (bubbles change it); every other offset the lookup
// follows (order entries, descriptor family, table and Bloom offsets and
// sizes) is re-checked here against the region lengths exactly as the View
// does, so no image a bubble can produce makes a lookup read outside it.
// Updates use bubble_scatter of gamt.cu (global offsets; a kernel of
// another module of the same context).
//
// Keys: n packets in structure-of-arrays order, word j of packet i at
// soa[j*stride+i] (flow.PackSoA over the projection; stride = n, or a
// batch's capacity).
//
// Speed (measured on an H200; see README): the lookup is specialised for
// each projection width P (0..27), so the packet key and the masked
// key live in registers (a dynamically indexed array would go to local
// memory), and the read-only parts a lookup walks for every packet — the
// coefficients of the hash functions in use, the class descriptors, the
// order, the Bloom filters — are staged into shared memory at the start of
// each block when they fit the budget the host chose (descriptor word
// D_STAGE, the dynamic shared memory size of the launch): loads the whole
// warp makes to one address, and Bloom probes, then never leave the SM.
// Three kernels split the widths (flow_lookup_w8, flow_lookup_w16,
// flow_lookup) so that a narrow image does not pay for the registers of
// the widest: on an H100 one kernel for every width took 130 registers, one
// block of 256 threads per SM (8 warps, mostly waiting); acl1's 5-word keys
// now run at 4 blocks per SM. out[i] is the best rule's id, 0xFFFFFFFF when
// none (rank 0). Rank = prio<<32 | ~id.
//
// Build (see the Makefile's kernels target):
//   nvcc -ptx -arch=sm_90      -o flow_sm90.ptx      flow.cu
//   nvcc -ptx -arch=compute_80 -o flow_compute80.ptx flow.cu
#include <stdint.h>

#include "layout.h" // generated from the Go constants (go generate ./kernels)

static_assert(FLOW_WAYS == 3, "flow_probe hashes and tests three cuckoo ways");

// ftab is where a lookup finds each part of a tuple/Bloom image: in shared
// memory where staged, else in the image. Seeds: function fn's coefficient
// pair i at seeds[fn*sstride + 2*i] (sstride 2*(P+1) staged, 2*28 not).
struct ftab {
	const uint32_t *seeds, *desc, *order, *ent, *bloom;
	uint32_t sstride, nslot, k, n;
	uint64_t entLen, bloomLen;
	bool isBloom, isMerge;
};

__device__ __forceinline__ uint64_t coef(const uint32_t* a, int i)
{
	return (uint64_t)a[2 * i] | (uint64_t)a[2 * i + 1] << 32;
}

// hash returns a[0] + sum a[1+i]*x[i] mod 2^64 over the P masked words x.
template <int P>
__device__ __forceinline__ uint64_t flow_hash(const uint32_t* a, const uint32_t* x)
{
	uint64_t h = coef(a, 0);
#pragma unroll
	for (int i = 0; i < P; i++)
		h += coef(a, i + 1) * (uint64_t)x[i];
	return h;
}

// top returns h >> (64-b), 0 when b == 0 (Go's shift by 64).
__device__ __forceinline__ uint64_t top(uint64_t h, uint32_t b)
{
	return b == 0 ? 0 : h >> (64 - b);
}

template <int P>
__device__ uint64_t flow_linear(const uint32_t* __restrict__ img, const uint32_t* d, const uint32_t* pk)
{
	const uint32_t s = S_FIXED + 2 * P;
	const uint32_t* ent = img + d[D_BASE + R_ENTRIES];
	uint32_t n = __ldg(&img[d[D_BASE + R_HEADER] + HDR_COUNT]);
	n = min(n, d[D_NSLOT]);
	uint64_t best = 0;
	for (uint32_t k = 0; k < n; k++) {
		const uint32_t* sl = ent + (uint64_t)k * s;
		uint32_t id = __ldg(&sl[S_ID]);
		if (id == EMPTY_ID)
			continue;
		uint64_t rank = (uint64_t)__ldg(&sl[S_PRIO]) << 32 | (uint64_t)(~id);
		if (rank <= best)
			continue;
		bool ok = true;
#pragma unroll
		for (int j = 0; j < P; j++)
			ok &= (pk[j] & __ldg(&sl[S_VALUE + P + j])) == __ldg(&sl[S_VALUE + j]);
		if (ok)
			best = rank;
	}
	return best;
}

// flow_filter reports whether the class of descriptor cd (a valid slot) is
// worth a probe for the packet whose key under the class mask is key: its
// hash family exists and, in a Bloom or merged image, its filter is in range
// and has both of the key's bits set.
template <int P>
__device__ __forceinline__ bool flow_filter(const ftab& f, const uint32_t* cd, const uint32_t* key)
{
	const uint32_t* c = cd + P;
	uint32_t fam = c[C_FAMILY];
	if (fam >= f.k)
		return false;
	if (!f.isBloom)
		return true;
	uint32_t lb = c[C_LOGBITS];
	if (lb < 5 || lb > FLOW_MAX_LOGBITS)
		return false;
	uint64_t off = c[C_BLOOM], size = (uint64_t)1 << (lb - 5);
	if (off + size > f.bloomLen)
		return false;
	const uint32_t* fs = f.seeds + (uint64_t)fam * FLOW_HASHFUNCS * f.sstride;
	const uint32_t* fl = f.bloom + off;
	uint64_t b1 = flow_hash<P>(fs + FLOW_WAYS * f.sstride, key) >> (64 - lb);
	uint64_t b2 = flow_hash<P>(fs + (FLOW_WAYS + 1) * f.sstride, key) >> (64 - lb);
	return (fl[b1 >> 5] & (1u << (b1 & 31))) != 0 && (fl[b2 >> 5] & (1u << (b2 & 31))) != 0;
}

// flow_probe looks the packet (key pk, key under the class mask key) up in
// the cuckoo table of the class of descriptor cd (flow_filter passed) and
// returns best raised to the rank of the rule it finds there.
template <int P>
__device__ __forceinline__ uint64_t flow_probe(const ftab& f, const uint32_t* cd, const uint32_t* pk, const uint32_t* key,
					       uint64_t best)
{
	const uint32_t ew = f.isMerge ? 2 * P + E_FIXED : P + E_FIXED;
	const uint32_t* c = cd + P;
	uint32_t logB = c[C_LOGB];
	if (logB > FLOW_MAX_LOGB)
		return best;
	uint64_t toff = c[C_TABLE], tsize = (uint64_t)(FLOW_WAYS * ew) << logB;
	if (toff + tsize > f.entLen)
		return best;
	const uint32_t* fs = f.seeds + (uint64_t)c[C_FAMILY] * FLOW_HASHFUNCS * f.sstride;
	const uint32_t* tbl = f.ent + toff;
	uint64_t sz = (uint64_t)1 << logB;
	uint64_t h0 = top(flow_hash<P>(fs, key), logB);
	uint64_t h1 = top(flow_hash<P>(fs + f.sstride, key), logB);
	uint64_t h2 = top(flow_hash<P>(fs + 2 * f.sstride, key), logB);
	uint64_t pos[3] = {h0 * ew, (sz + h1) * ew, (2 * sz + h2) * ew};
	uint32_t ids[3];
#pragma unroll
	for (int w = 0; w < 3; w++)
		ids[w] = __ldg(&tbl[pos[w] + P + E_ID]);
	if (f.isMerge) {
		// Merged class (TupleMerge): any of the three entries may
		// match, each under its own mask [value P, id, prio, mask P].
#pragma unroll
		for (int w = 0; w < 3; w++) {
			if (ids[w] == EMPTY_ID)
				continue;
			bool eq = true;
#pragma unroll
			for (int j = 0; j < P; j++)
				eq &= (pk[j] & __ldg(&tbl[pos[w] + P + E_MASK + j])) == __ldg(&tbl[pos[w] + j]);
			if (!eq)
				continue;
			uint64_t r = (uint64_t)__ldg(&tbl[pos[w] + P + E_PRIO]) << 32 | (uint64_t)(~ids[w]);
			if (r > best)
				best = r;
		}
		return best;
	}
	// The first of the three that holds the key (no dynamically indexed
	// array: it would live in local memory).
	uint32_t hid = EMPTY_ID;
	uint64_t hpos = 0;
#pragma unroll
	for (int w = 0; w < 3; w++) {
		if (hid != EMPTY_ID || ids[w] == EMPTY_ID)
			continue;
		bool eq = true;
#pragma unroll
		for (int j = 0; j < P; j++)
			eq &= __ldg(&tbl[pos[w] + j]) == key[j];
		if (eq)
			hid = ids[w], hpos = pos[w];
	}
	if (hid == EMPTY_ID)
		return best;
	uint64_t r = (uint64_t)__ldg(&tbl[hpos + P + E_PRIO]) << 32 | (uint64_t)(~hid);
	return r > best ? r : best;
}

// flow_pre is the prefilter (flow.PreBucket): 8 bits of the packet key pk
// picked by the selector of the class of descriptor cd, tested in the
// bitmap of the values its entries have.
template <int P>
__device__ __forceinline__ bool flow_pre(const uint32_t* cd, const uint32_t* pk)
{
	const uint32_t sel = cd[P + C_SEL];
	const uint32_t w0 = sel & 31, w1 = sel >> 14 & 31;
	uint32_t x0 = 0, x1 = 0;
#pragma unroll
	for (int j = 0; j < P; j++) {
		x0 = j == w0 ? pk[j] : x0;
		x1 = j == w1 ? pk[j] : x1;
	}
	const uint32_t b = (x0 >> (sel >> 5 & 31) & (sel >> 10 & 15)) | (x1 >> (sel >> 19 & 31) & (sel >> 24 & 15)) << 4;
	return (cd[P + C_PRE + (b >> 5)] >> (b & 31) & 1) != 0;
}

// flow_rest tests the packet (key pk) against the class of descriptor cd
// (a valid slot whose prefilter passed): the Bloom filter, then the probe;
// the key under the class mask is computed once for both.
template <int P>
__device__ __forceinline__ uint64_t flow_rest(const ftab& f, const uint32_t* cd, const uint32_t* pk, uint64_t best)
{
	uint32_t key[P > 0 ? P : 1];
#pragma unroll
	for (int j = 0; j < P; j++)
		key[j] = pk[j] & cd[j];
	if (flow_filter<P>(f, cd, key))
		best = flow_probe<P>(f, cd, pk, key, best);
	return best;
}

// flow_tuple walks order positions first, first+step, ... (classes in
// descending max priority) and returns the best rank, exactly as
// flow.View does. (Testing a group of classes' Bloom filters together, so
// that their latencies overlap, measured slower on an H100: 862 and 840
// Mpps on acl1 for groups of 4 and 2 against 915 one class at a time; the
// registers it takes cost more resident warps than it saves waiting.)
template <int P>
__device__ uint64_t flow_tuple(const ftab& f, const uint32_t* pk, uint32_t first, uint32_t step)
{
	const uint32_t dw = P + C_FIXED;
	uint64_t best = 0;
	for (uint32_t i = first; i < f.n; i += step) {
		uint32_t slot = f.order[i];
		if (slot >= f.nslot)
			continue;
		const uint32_t* cd = f.desc + slot * dw;
		if ((best >> 32) > (uint64_t)cd[P + C_MAXPRIO])
			break;
		if (flow_pre<P>(cd, pk))
			best = flow_rest<P>(f, cd, pk, best);
	}
	return best;
}

// smem is the dynamic shared memory of a launch (the staged parts).
extern __shared__ uint32_t smem[];

// stage copies n words of src to dst with the whole block.
__device__ __forceinline__ void stage(uint32_t* dst, const uint32_t* __restrict__ src, uint32_t n)
{
	for (uint32_t i = threadIdx.x; i < n; i += blockDim.x)
		dst[i] = src[i];
}

// setup fills f for the image (tuple and Bloom), staging into shared memory
// what the descriptor's D_STAGE asks for, in the order seeds, classes,
// order, Bloom; the host sized the launch's dynamic shared memory to match.
__device__ void setup(ftab& f, const uint32_t* __restrict__ img, const uint32_t* d, uint32_t* smem)
{
	const uint32_t p = d[D_P], st = d[D_STAGE];
	f.k = d[D_K];
	f.nslot = d[D_NSLOT];
	f.entLen = d[D_LEN + R_ENTRIES];
	f.bloomLen = d[D_LEN + R_BLOOM];
	f.isBloom = d[D_ALGO] == ALGO_BLOOM || d[D_ALGO] == ALGO_MERGE;
	f.isMerge = d[D_ALGO] == ALGO_MERGE;
	f.ent = img + d[D_BASE + R_ENTRIES];
	f.n = min(__ldg(&img[d[D_BASE + R_HEADER] + HDR_COUNT]), d[D_LEN + R_ORDER]);
	uint32_t* s = smem;
	if (st & STAGE_SEEDS) {
		// Only the coefficients P words use: K*5 functions of P+1 pairs.
		const uint32_t per = 2 * (p + 1), nf = min(f.k * FLOW_HASHFUNCS, d[D_LEN + R_SEEDS] / (2 * FLOW_HASHCOEFS));
		const uint32_t* src = img + d[D_BASE + R_SEEDS];
		for (uint32_t i = threadIdx.x; i < nf * per; i += blockDim.x)
			s[i] = src[(i / per) * 2 * FLOW_HASHCOEFS + i % per];
		f.seeds = s, f.sstride = per;
		s += nf * per;
	} else {
		f.seeds = img + d[D_BASE + R_SEEDS], f.sstride = 2 * FLOW_HASHCOEFS;
	}
	f.desc = img + d[D_BASE + R_CLASSES];
	if (st & STAGE_CLASSES) {
		stage(s, f.desc, d[D_LEN + R_CLASSES]);
		f.desc = s;
		s += d[D_LEN + R_CLASSES];
	}
	f.order = img + d[D_BASE + R_ORDER];
	if (st & STAGE_ORDER) {
		stage(s, f.order, f.n);
		f.order = s;
		s += d[D_LEN + R_ORDER];
	}
	f.bloom = img + d[D_BASE + R_BLOOM];
	if (st & STAGE_BLOOM) {
		stage(s, f.bloom, d[D_LEN + R_BLOOM]);
		f.bloom = s;
	}
	__syncthreads();
}

// classify_refill is the tuple/Bloom/merged lookup with a lane per packet,
// refilled lanes and deferred class tests. A warp takes the packets of its
// chunk 32 at a time. Each step, every lane that is not holding a class
// walks its own packet one class further with the cheap prefilter alone; a
// class that passes it is held, and the lanes run the rest of the test
// (Bloom filter, probe) together once at least FLOW_DEFER of the lanes still
// walking hold one (or all of them do). A lane whose packet is done writes
// its answer and takes the chunk's next packet at once (a ballot numbers
// the lanes that finished). A quarter of prefilter steps pass on acl1, so
// without the deferral nearly every step would run the Bloom and probe
// code for a few lanes; with one thread per packet for the whole walk
// (mode 1) a lane idles from its packet's early exit until the warp's
// slowest packet is done (on acl1 a warp's 32 packets walk 99 of the 100
// merged classes, a packet alone 26). The answers are the same: each
// packet walks its classes in order with the same early exit.
#ifndef FLOW_DEFER
#define FLOW_DEFER 16
#endif

template <int P>
__device__ void classify_refill(const ftab& f, const uint32_t* __restrict__ soa, uint32_t* __restrict__ out, int n, int stride)
{
	const unsigned full = 0xFFFFFFFFu;
	const int lane = threadIdx.x & 31;
	const long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
	const long long gw = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
	// Chunks of whole warps' worth: a small batch fills few warps fully.
	long long chunk = (n + warps - 1) / warps;
	chunk = max(32LL, (chunk + 31) & ~31LL);
	long long next = gw * chunk;
	const long long end = min((long long)n, next + chunk);
	if (next >= end)
		return; // uniform in the warp
	const uint32_t dw = P + C_FIXED;
	uint32_t pk[P > 0 ? P : 1];
	uint64_t best = 0;
	uint32_t pos = 0;
	long long idx = next + lane;
	next += 32;
	bool live = idx < end, held = false;
	const uint32_t* cd = f.desc;
	if (live) {
#pragma unroll
		for (int j = 0; j < P; j++)
			pk[j] = soa[(size_t)j * stride + idx];
	}
	for (;;) {
		const unsigned lv = __ballot_sync(full, live);
		if (lv == 0)
			break;
		const unsigned hv = __ballot_sync(full, held);
		const int nh = __popc(hv);
		if (nh > 0 && nh >= min(FLOW_DEFER, __popc(lv))) {
			if (held) {
				best = flow_rest<P>(f, cd, pk, best);
				held = false;
			}
			continue;
		}
		bool done = false;
		if (live && !held) {
			if (pos >= f.n) {
				done = true;
			} else {
				const uint32_t slot = f.order[pos++];
				if (slot < f.nslot) {
					cd = f.desc + slot * dw;
					if ((best >> 32) > (uint64_t)cd[P + C_MAXPRIO])
						done = true;
					else
						held = flow_pre<P>(cd, pk);
				}
			}
			if (done)
				out[idx] = best == 0 ? EMPTY_ID : ~(uint32_t)best;
		}
		const unsigned m = __ballot_sync(full, done);
		if (m != 0) {
			if (done) {
				idx = next + __popc(m & ((1u << lane) - 1));
				live = idx < end;
				best = 0, pos = 0;
				if (live) {
#pragma unroll
					for (int j = 0; j < P; j++)
						pk[j] = soa[(size_t)j * stride + idx];
				}
			}
			next += __popc(m);
		}
	}
}

// classify_warp is the tuple/Bloom/merged lookup with a warp per packet,
// for small batches, whose lookups one lane per packet would walk one
// class after another (on 131,072 rules in 512 classes, merged: 34-40 µs a
// kernel at any batch size, most of it the dependent loads of a packet's
// walk). The warp walks the packet's classes 32 at a time in their order
// (descending max priority), lane l taking class 32r+l of round r; after
// each round the warp's best rank is every lane's (a maximum over shuffles),
// and the walk stops after a round in which a lane found its class's max
// priority below the best (every later class is lower still). The answer
// is the same as the lane-per-packet walks': the best rank over the
// classes, a class being skipped only when none of its rules can beat a
// rank already found (rank = prio<<32 | ~id: no ties). warp_walk is the
// walk of one packet (key pk, the same in every lane of the warp), which
// the resident lookups (resident.cu) share.
template <int P>
__device__ __forceinline__ uint64_t warp_walk(const ftab& f, const uint32_t* pk)
{
	const unsigned full = 0xFFFFFFFFu;
	const int lane = threadIdx.x & 31;
	const uint32_t dw = P + C_FIXED;
	uint64_t best = 0;
	for (uint32_t base = 0; base < f.n; base += 32) {
		const uint32_t k = base + lane;
		bool stop = false, walk = false;
		const uint32_t* cd = f.desc;
		if (k < f.n) {
			const uint32_t slot = f.order[k];
			if (slot < f.nslot) {
				cd = f.desc + slot * dw;
				stop = (best >> 32) > (uint64_t)cd[P + C_MAXPRIO];
				walk = !stop;
			}
		}
		const bool last = __any_sync(full, stop);
		if (walk && flow_pre<P>(cd, pk))
			best = flow_rest<P>(f, cd, pk, best);
#pragma unroll
		for (int o = 16; o > 0; o >>= 1) {
			const uint64_t v = __shfl_xor_sync(full, best, o);
			best = v > best ? v : best;
		}
		if (last)
			break;
	}
	return best;
}

template <int P>
__device__ void classify_warp(const ftab& f, const uint32_t* __restrict__ soa, uint32_t* __restrict__ out, int n, int stride)
{
	const long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
	for (long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5; i < n; i += warps) { // uniform in the warp
		uint32_t pk[P > 0 ? P : 1];
#pragma unroll
		for (int j = 0; j < P; j++)
			pk[j] = soa[(size_t)j * stride + i];
		const uint64_t best = warp_walk<P>(f, pk);
		if ((threadIdx.x & 31) == 0)
			out[i] = best == 0 ? EMPTY_ID : ~(uint32_t)best;
	}
}

// classify runs the lookups for one P: linear images, and mode 1, one
// thread per packet over a grid-stride loop; tuple, Bloom and merged
// images in mode 0 (the default), classify_refill, and in mode 2 (small
// batches), classify_warp.
template <int P>
__device__ void classify(const uint32_t* __restrict__ img, const uint32_t* d, const ftab& f,
			 const uint32_t* __restrict__ soa, uint32_t* __restrict__ out, int n, int stride, int mode)
{
	const bool linear = d[D_ALGO] == ALGO_LINEAR;
	if (!linear && mode == 0) {
		classify_refill<P>(f, soa, out, n, stride);
		return;
	}
	if (!linear && mode == 2) {
		classify_warp<P>(f, soa, out, n, stride);
		return;
	}
	uint32_t pk[P > 0 ? P : 1];
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
#pragma unroll
		for (int j = 0; j < P; j++)
			pk[j] = soa[(size_t)j * stride + i];
		uint64_t best = linear ? flow_linear<P>(img, d, pk) : flow_tuple<P>(f, pk, 0, 1);
		out[i] = best == 0 ? EMPTY_ID : ~(uint32_t)best;
	}
}

// dispatch runs classify<P> for the image's width p, one of LO..HI.
template <int LO, int HI>
__device__ __forceinline__ void dispatch(uint32_t p, const uint32_t* __restrict__ img, const uint32_t* d, const ftab& f,
					 const uint32_t* __restrict__ soa, uint32_t* __restrict__ out, int n, int stride, int mode)
{
	if (p == LO) {
		classify<LO>(img, d, f, soa, out, n, stride, mode);
		return;
	}
	if constexpr (LO < HI)
		dispatch<LO + 1, HI>(p, img, d, f, soa, out, n, stride, mode);
}

// lookup is the body of the flow_lookup kernels for widths LO..HI (an
// image of another width gets no answers written: the host picks the
// kernel by width).
template <int LO, int HI>
__device__ __forceinline__ void lookup(const uint32_t* __restrict__ img, const uint32_t* __restrict__ desc, int mode,
				       const uint32_t* __restrict__ soa, uint32_t* __restrict__ out, int n, int stride)
{
	__shared__ uint32_t d[FLOW_DESC];
	for (int i = threadIdx.x; i < FLOW_DESC; i += blockDim.x)
		d[i] = desc[i];
	__syncthreads();
	ftab tf;
	if (d[D_ALGO] != ALGO_LINEAR) // uniform: every thread reaches setup's barrier
		setup(tf, img, d, smem);
	dispatch<LO, HI>(min(d[D_P], (uint32_t)FLOW_KEYWORDS), img, d, tf, soa, out, n, stride, mode);
}

// The kernels (resident.cu includes this file for the device functions
// above and defines FLOW_NO_KERNELS).
#ifndef FLOW_NO_KERNELS
// flow_lookup: out[i] = best rule for packet i, the descriptor and the
// staged parts in shared memory. mode 0 walks
// tuple, Bloom and merged images with refilled lanes (classify_refill),
// mode 1 with one thread per packet over a grid-stride loop (the
// comparison; linear images always), mode 2 with a warp per packet
// (classify_warp: the host's choice for small batches, launched with 32
// threads a packet). A kernel holds the
// registers its widest width needs, and registers bound how many warps an
// SM keeps resident (the lookups wait on shared memory and L2 and need
// many), so narrow images have kernels of their own: flow_lookup_w8 for
// widths up to 8 (ClassBench 5-tuples are 5 words) at four blocks of 256
// per SM (64 registers), flow_lookup_w16 up to 16 at three, flow_lookup
// widths 17 to 27 at two. An image of another width gets no answers from a
// kernel (the host picks the kernel by width: gpu.CUDA.flowFn).
#ifndef FLOW_W8_BLOCKS
#define FLOW_W8_BLOCKS 4
#endif
#ifndef FLOW_W16_BLOCKS
#define FLOW_W16_BLOCKS 3
#endif
#ifndef FLOW_ALL_BLOCKS
#define FLOW_ALL_BLOCKS 2
#endif

extern "C" __global__ void __launch_bounds__(256, FLOW_W8_BLOCKS)
flow_lookup_w8(const uint32_t* __restrict__ img, const uint32_t* __restrict__ desc, int mode,
	       const uint32_t* __restrict__ soa, uint32_t* __restrict__ out, int n, int stride)
{
	lookup<0, 8>(img, desc, mode, soa, out, n, stride);
}

extern "C" __global__ void __launch_bounds__(256, FLOW_W16_BLOCKS)
flow_lookup_w16(const uint32_t* __restrict__ img, const uint32_t* __restrict__ desc, int mode,
		const uint32_t* __restrict__ soa, uint32_t* __restrict__ out, int n, int stride)
{
	lookup<9, 16>(img, desc, mode, soa, out, n, stride);
}

extern "C" __global__ void __launch_bounds__(256, FLOW_ALL_BLOCKS)
flow_lookup(const uint32_t* __restrict__ img, const uint32_t* __restrict__ desc, int mode,
	    const uint32_t* __restrict__ soa, uint32_t* __restrict__ out, int n, int stride)
{
	lookup<17, FLOW_KEYWORDS>(img, desc, mode, soa, out, n, stride);
}

// classify_split is classify with G threads per packet: thread (i, g) walks
// order positions g, g+G, g+2G, ... (each such subsequence is still in
// descending max priority, so the early exit holds) and merges its best
// rank into rank[i] with a 64-bit atomicMax (rank = prio<<32 | ~id, one
// ranking everywhere). The alternative to one thread walking every class,
// measured against it (BenchmarkCUDAFlowKernel).
template <int P>
__device__ void classify_split(const ftab& f, const uint32_t* __restrict__ soa, unsigned long long* __restrict__ rank,
			       int n, int stride, int groups)
{
	uint32_t pk[P > 0 ? P : 1];
	const long long total = (long long)n * groups;
	for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < total; t += (long long)gridDim.x * blockDim.x) {
		const int i = (int)(t % n), g = (int)(t / n);
#pragma unroll
		for (int j = 0; j < P; j++)
			pk[j] = soa[(size_t)j * stride + i];
		uint64_t best = flow_tuple<P>(f, pk, g, groups);
		if (best != 0)
			atomicMax(&rank[i], (unsigned long long)best);
	}
}

// flow_lookup_split: tuple and Bloom images only; rank[0:n] must be zero
// before the launch; flow_ranks turns the ranks into rule ids.
extern "C" __global__ void flow_lookup_split(const uint32_t* __restrict__ img, const uint32_t* __restrict__ desc, int groups,
					     const uint32_t* __restrict__ soa, unsigned long long* __restrict__ rank, int n, int stride)
{
	__shared__ uint32_t d[FLOW_DESC];
	for (int i = threadIdx.x; i < FLOW_DESC; i += blockDim.x)
		d[i] = desc[i];
	__syncthreads();
	if (d[D_ALGO] == ALGO_LINEAR || groups < 1)
		return;
	ftab tf;
	setup(tf, img, d, smem);
	switch (min(d[D_P], (uint32_t)FLOW_KEYWORDS)) {
#define CASE(P) \
	case P:     \
		classify_split<P>(tf, soa, rank, n, stride, groups); \
		break;
	CASE(0) CASE(1) CASE(2) CASE(3) CASE(4) CASE(5) CASE(6) CASE(7) CASE(8) CASE(9) CASE(10) CASE(11) CASE(12)
	CASE(13) CASE(14) CASE(15) CASE(16) CASE(17) CASE(18) CASE(19) CASE(20) CASE(21) CASE(22) CASE(23) CASE(24)
	CASE(25) CASE(26) CASE(27)
#undef CASE
	}
}

// flow_ranks: out[i] = the rule id of rank[i], 0xFFFFFFFF for rank 0.
extern "C" __global__ void flow_ranks(const unsigned long long* __restrict__ rank, uint32_t* __restrict__ out, int n)
{
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
		out[i] = rank[i] == 0 ? EMPTY_ID : ~(uint32_t)rank[i];
}
#endif // FLOW_NO_KERNELS

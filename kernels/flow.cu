// Flow classification (package flow's device image), for gswitch's gpu
// package: linear search, tuple-space search over cuckoo tables and Bloom
// search, bit for bit what flow.View.Lookup computes (tables/flow/view.go).
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
// soa[j*n+i] (flow.PackSoA over the projection). out[i] is the best rule's
// id, 0xFFFFFFFF when none (rank 0). Rank = prio<<32 | ~id.
//
// Build (see the Makefile's kernels target):
//   nvcc -ptx -arch=sm_90      -o flow_sm90.ptx      flow.cu
//   nvcc -ptx -arch=compute_80 -o flow_compute80.ptx flow.cu
#include <stdint.h>

#define FLOW_DESC 16
#define FLOW_KEYWORDS 27
#define FLOW_HASHFUNCS 5
#define FLOW_HASHCOEFS 28
#define FLOW_WAYS 3
#define EMPTY_ID 0xFFFFFFFFu

// Regions.
#define R_HEADER 0
#define R_SEEDS 1
#define R_CLASSES 2
#define R_ORDER 3
#define R_ENTRIES 4
#define R_BLOOM 5

// Descriptor words.
#define D_ALGO 12
#define D_P 13
#define D_K 14
#define D_NSLOT 15

// Header word: the count (linear high-water mark, or classes in the order).
#define HDR_COUNT (4 + FLOW_KEYWORDS + 1)

// Class descriptor words after the P mask words.
#define C_FAMILY 0
#define C_TABLE 1
#define C_LOGB 2
#define C_MAXPRIO 3
#define C_BLOOM 5
#define C_LOGBITS 6

#define ALGO_LINEAR 0
#define ALGO_BLOOM 2

// hash returns a[0] + sum a[1+i]*x[i] mod 2^64 for function fn (global index
// family*5 + f) over the P masked words x; coefficients are (lo, hi) pairs.
__device__ __forceinline__ uint64_t flow_hash(const uint32_t* __restrict__ seeds, uint32_t fn, const uint32_t* x, int p)
{
	const uint32_t* a = seeds + 2 * fn * FLOW_HASHCOEFS;
	uint64_t h = (uint64_t)__ldg(&a[0]) | (uint64_t)__ldg(&a[1]) << 32;
	for (int i = 0; i < p; i++) {
		uint64_t c = (uint64_t)__ldg(&a[2 * (i + 1)]) | (uint64_t)__ldg(&a[2 * (i + 1) + 1]) << 32;
		h += c * (uint64_t)x[i];
	}
	return h;
}

// top returns h >> (64-b), 0 when b == 0 (Go's shift by 64).
__device__ __forceinline__ uint64_t top(uint64_t h, uint32_t b)
{
	return b == 0 ? 0 : h >> (64 - b);
}

__device__ uint64_t flow_linear(const uint32_t* __restrict__ img, const uint32_t* d, const uint32_t* pk)
{
	const int p = d[D_P];
	const uint32_t s = 2 + 2 * p;
	const uint32_t* ent = img + d[R_ENTRIES];
	uint32_t n = __ldg(&img[d[R_HEADER] + HDR_COUNT]);
	n = min(n, d[D_NSLOT]);
	uint64_t best = 0;
	for (uint32_t k = 0; k < n; k++) {
		const uint32_t* sl = ent + (uint64_t)k * s;
		uint32_t id = __ldg(&sl[1]);
		if (id == EMPTY_ID)
			continue;
		uint64_t rank = (uint64_t)__ldg(&sl[0]) << 32 | (uint64_t)(~id);
		if (rank <= best)
			continue;
		bool ok = true;
		for (int j = 0; j < p && ok; j++)
			ok = (pk[j] & __ldg(&sl[2 + p + j])) == __ldg(&sl[2 + j]);
		if (ok)
			best = rank;
	}
	return best;
}

__device__ uint64_t flow_tuple(const uint32_t* __restrict__ img, const uint32_t* d, const uint32_t* pk)
{
	const int p = d[D_P];
	const uint32_t ew = p + 2, dw = p + 7;
	const uint32_t k = d[D_K], nslot = d[D_NSLOT];
	const uint32_t* seeds = img + d[R_SEEDS];
	const uint32_t* desc = img + d[R_CLASSES];
	const uint32_t* order = img + d[R_ORDER];
	const uint32_t* ent = img + d[R_ENTRIES];
	const uint32_t* bloom = img + d[R_BLOOM];
	const uint64_t entLen = d[6 + R_ENTRIES], bloomLen = d[6 + R_BLOOM];
	const bool isBloom = d[D_ALGO] == ALGO_BLOOM;
	uint32_t n = __ldg(&img[d[R_HEADER] + HDR_COUNT]);
	n = min(n, d[6 + R_ORDER]);
	uint64_t best = 0;
	uint32_t key[FLOW_KEYWORDS];
	for (uint32_t i = 0; i < n; i++) {
		uint32_t slot = __ldg(&order[i]);
		if (slot >= nslot)
			continue;
		const uint32_t* cd = desc + (uint64_t)slot * dw;
		const uint32_t* c = cd + p;
		if ((best >> 32) > (uint64_t)__ldg(&c[C_MAXPRIO]))
			break;
		for (int j = 0; j < p; j++)
			key[j] = pk[j] & __ldg(&cd[j]);
		uint32_t fam = __ldg(&c[C_FAMILY]);
		if (fam >= k)
			continue;
		uint32_t fn0 = fam * FLOW_HASHFUNCS;
		if (isBloom) {
			uint32_t lb = __ldg(&c[C_LOGBITS]);
			if (lb < 5 || lb > 31)
				continue;
			uint64_t off = __ldg(&c[C_BLOOM]), size = (uint64_t)1 << (lb - 5);
			if (off + size > bloomLen)
				continue;
			const uint32_t* f = bloom + off;
			uint64_t b1 = flow_hash(seeds, fn0 + FLOW_WAYS, key, p) >> (64 - lb);
			uint64_t b2 = flow_hash(seeds, fn0 + FLOW_WAYS + 1, key, p) >> (64 - lb);
			if ((__ldg(&f[b1 >> 5]) & (1u << (b1 & 31))) == 0 || (__ldg(&f[b2 >> 5]) & (1u << (b2 & 31))) == 0)
				continue;
		}
		uint32_t logB = __ldg(&c[C_LOGB]);
		if (logB > 30)
			continue;
		uint64_t toff = __ldg(&c[C_TABLE]), tsize = (uint64_t)(FLOW_WAYS * ew) << logB;
		if (toff + tsize > entLen)
			continue;
		const uint32_t* tbl = ent + toff;
		uint64_t sz = (uint64_t)1 << logB;
		uint64_t h0 = top(flow_hash(seeds, fn0, key, p), logB);
		uint64_t h1 = top(flow_hash(seeds, fn0 + 1, key, p), logB);
		uint64_t h2 = top(flow_hash(seeds, fn0 + 2, key, p), logB);
		uint64_t pos[3] = {h0 * ew, (sz + h1) * ew, (2 * sz + h2) * ew};
		uint32_t ids[3];
		for (int w = 0; w < 3; w++)
			ids[w] = __ldg(&tbl[pos[w] + p]);
		int hit = -1;
		for (int w = 0; w < 3 && hit < 0; w++) {
			if (ids[w] == EMPTY_ID)
				continue;
			bool eq = true;
			for (int j = 0; j < p && eq; j++)
				eq = __ldg(&tbl[pos[w] + j]) == key[j];
			if (eq)
				hit = w;
		}
		if (hit < 0)
			continue;
		uint32_t id = ids[hit];
		uint64_t r = (uint64_t)__ldg(&tbl[pos[hit] + p + 1]) << 32 | (uint64_t)(~id);
		if (r > best)
			best = r;
	}
	return best;
}

// flow_lookup: out[i] = best rule for packet i. One thread per packet,
// grid-stride, the descriptor in shared memory.
extern "C" __global__ void flow_lookup(const uint32_t* __restrict__ img, const uint32_t* __restrict__ desc,
				       const uint32_t* __restrict__ soa, uint32_t* __restrict__ out, int n)
{
	__shared__ uint32_t d[FLOW_DESC];
	for (int i = threadIdx.x; i < FLOW_DESC; i += blockDim.x)
		d[i] = desc[i];
	__syncthreads();
	const int p = min(d[D_P], (uint32_t)FLOW_KEYWORDS);
	const bool linear = d[D_ALGO] == ALGO_LINEAR;
	uint32_t pk[FLOW_KEYWORDS];
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
		for (int j = 0; j < p; j++)
			pk[j] = soa[(size_t)j * n + i];
		uint64_t best = linear ? flow_linear(img, d, pk) : flow_tuple(img, d, pk);
		out[i] = best == 0 ? EMPTY_ID : ~(uint32_t)best;
	}
}

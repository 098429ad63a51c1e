// gPF multi-match packet filtering (Kim et al.): every filter of a compiled
// set evaluated on every packet in three stages — criteria (the elementary
// tests of packet fields), sub-predicates (AND, OR, NOT of earlier values)
// and filters (a root value each) — fused into one kernel, a thread per
// packet. Package tables/filter has the device layout and its CPU twin,
// LayoutEvaluator, equal to Evaluator.EvalStages bit for bit.
//
// ABI: gpf_filter(crit, exprs, nodes, roots, cfgidx, cfgnodes, order, nc,
//                 nn, nf, pkts, snap, caplen, wire, n, gvals, smem_vals,
//                 bits, bit_words, counts, bytesum)
//   crit..cfgnodes  the layout's word arrays (filter.Layout), nc criteria,
//            nn sub-predicates, nf filters;
//   order    nc criterion indices, the order the criteria are computed in:
//            criteria loading the same field (base, IPv4 header offset,
//            offset, size, mask) are adjacent, and a criterion whose load
//            is the previous one's reuses its value (the test is uniform
//            across the warp); null: index order, no reuse;
//   pkts     n rows of snap bytes: the reduced packets (each packet's first
//            snap bytes, which hold every byte a criterion can read; the
//            host sends whole packets when a criterion's offset depends on
//            packet data beyond an IPv4 header length);
//   caplen, wire  per packet: the captured length (loads past it make a
//            criterion unknown) and the length on the wire;
//   gvals    scratch for the values when smem_vals is 0: (nc+nn) bytes per
//            thread of the grid, value-major (coalesced);
//   smem_vals  non-zero: the values in dynamic shared memory, (nc+nn) x
//            blockDim bytes;
//   bits     bit_words words per packet (0: none): bit f set when filter f
//            matched;
//   counts   nf words: each incremented by the packets filter f matched
//            (one atomic per warp and filter, the warp's matches counted by
//            a ballot);
//   bytesum  nf 64-bit words (null: none): each incremented by the wire
//            lengths of the packets filter f matched (a warp reduction).
// A packet with an unknown criterion (a load past its captured length, a
// division by zero) is decided per filter by the filter's control-flow
// blocks, as libpcap's BPF program would (LayoutEvaluator.walk).
// Values: 0 false, 1 true, 2 unknown.
#include <stdint.h>

#define V_FALSE 0
#define V_TRUE 1
#define V_ABORT 2
#define MAX_STACK 32

struct Pkt {
	const uint8_t* d;
	uint32_t len;  // captured length
	uint32_t snap; // bytes present
};

__device__ __forceinline__ bool ld(const Pkt& p, uint64_t off, uint32_t size, uint32_t* x)
{
	if (off + size > p.len || off + size > p.snap)
		return false;
	const uint8_t* b = p.d + off;
	*x = size == 1 ? b[0] : size == 2 ? (uint32_t)b[0] << 8 | b[1] : (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
	return true;
}

__device__ __forceinline__ bool addr(const Pkt& p, uint32_t base, uint32_t netoff, uint32_t off, uint32_t idx, uint64_t* a)
{
	if (base == 1) { // BaseIPv4
		if ((uint64_t)netoff >= p.len || netoff >= p.snap)
			return false;
		const uint32_t x = (uint32_t)(p.d[netoff] & 0x0f) * 4;
		*a = (uint64_t)netoff + (uint64_t)(uint32_t)(x + off + idx);
		return true;
	}
	*a = (uint64_t)off + idx;
	return true;
}

__device__ __forceinline__ uint8_t rel_true(uint32_t rel, uint32_t a, uint32_t k)
{
	bool b = false;
	switch (rel) {
	case 0:
		b = a == k;
		break;
	case 1:
		b = a > k;
		break;
	case 2:
		b = a >= k;
		break;
	case 3:
		b = (a & k) != 0;
		break;
	}
	return b ? V_TRUE : V_FALSE;
}

__device__ bool alu(uint32_t op, uint32_t a, uint32_t b, uint32_t* r)
{
	switch (op) {
	case 3:
		*r = a + b;
		return true;
	case 4:
		*r = a - b;
		return true;
	case 5:
		*r = a * b;
		return true;
	case 6:
		if (b == 0)
			return false;
		*r = a / b;
		return true;
	case 7:
		if (b == 0)
			return false;
		*r = a % b;
		return true;
	case 8:
		*r = a & b;
		return true;
	case 9:
		*r = a | b;
		return true;
	case 10:
		*r = a ^ b;
		return true;
	case 11:
		*r = b >= 32 ? 0 : a << b;
		return true;
	case 12:
		*r = b >= 32 ? 0 : a >> b;
		return true;
	}
	return false;
}

__device__ uint8_t crit_expr(const uint32_t* __restrict__ exprs, uint32_t pc0, uint32_t npc, uint32_t rel, const Pkt& p,
			     uint32_t wire)
{
	uint32_t st[MAX_STACK];
	int sp = 0;
	for (uint32_t pc = pc0; pc < pc0 + npc; pc++) {
		const uint32_t* in = exprs + 3 * (size_t)pc;
		const uint32_t op = in[0] & 0xff;
		if (op == 0) { // const
			if (sp >= MAX_STACK)
				return V_ABORT;
			st[sp++] = in[1];
		} else if (op == 1) { // len
			if (sp >= MAX_STACK)
				return V_ABORT;
			st[sp++] = wire;
		} else if (op == 2) { // load: pop index, push value
			if (sp < 1)
				return V_ABORT;
			uint64_t a;
			uint32_t x;
			if (!addr(p, in[0] >> 8 & 0xff, in[2], in[1], st[sp - 1], &a) || !ld(p, a, in[0] >> 16 & 0xff, &x))
				return V_ABORT;
			st[sp - 1] = x;
		} else if (op == 13) { // neg
			if (sp < 1)
				return V_ABORT;
			st[sp - 1] = 0u - st[sp - 1];
		} else {
			if (sp < 2)
				return V_ABORT;
			uint32_t r;
			if (!alu(op, st[sp - 2], st[sp - 1], &r))
				return V_ABORT;
			st[sp - 2] = r;
			sp--;
		}
	}
	if (sp < 2)
		return V_ABORT;
	return rel_true(rel, st[sp - 2], st[sp - 1]);
}

__device__ __forceinline__ uint8_t criterion(const uint32_t* __restrict__ w, const uint32_t* __restrict__ exprs, const Pkt& p,
					     uint32_t wire)
{
	const uint32_t w0 = __ldg(w), rel = w0 >> 4 & 0xf;
	switch (w0 & 0xf) {
	case 2: // const
		return (uint8_t)__ldg(w + 4);
	case 1: // len
		return rel_true(rel, wire, __ldg(w + 4));
	case 3: // expr
		return crit_expr(exprs, __ldg(w + 4), __ldg(w + 5), rel, p, wire);
	}
	uint64_t a;
	uint32_t x;
	if (!addr(p, w0 >> 8 & 0xff, __ldg(w + 1), __ldg(w + 2), 0, &a) || !ld(p, a, w0 >> 16 & 0xff, &x))
		return V_ABORT;
	return rel_true(rel, x & __ldg(w + 3), __ldg(w + 4));
}

// criterion_reuse is criterion for a plain load whose field may equal the
// previous load's (same w0 load bits, w1, w2, w3): then the value loaded
// last (*x, *ok) serves again. key holds the previous load's words.
__device__ __forceinline__ uint8_t criterion_reuse(const uint32_t* __restrict__ w, const uint32_t* __restrict__ exprs,
						   const Pkt& p, uint32_t wire, uint32_t key[4], uint32_t* x, bool* ok)
{
	const uint32_t w0 = __ldg(w), rel = w0 >> 4 & 0xf;
	if ((w0 & 0xf) != 0) {
		key[0] = 0xffffffffu;
		return criterion(w, exprs, p, wire);
	}
	const uint32_t w1 = __ldg(w + 1), w2 = __ldg(w + 2), w3 = __ldg(w + 3);
	if (key[0] != (w0 & 0xffff0f00u) || key[1] != w1 || key[2] != w2 || key[3] != w3) {
		key[0] = w0 & 0xffff0f00u, key[1] = w1, key[2] = w2, key[3] = w3;
		uint64_t a;
		uint32_t v = 0;
		*ok = addr(p, w0 >> 8 & 0xff, w1, w2, 0, &a) && ld(p, a, w0 >> 16 & 0xff, &v);
		*x = v & w3;
	}
	if (!*ok)
		return V_ABORT;
	return rel_true(rel, *x, __ldg(w + 4));
}

extern "C" __global__ void gpf_filter(const uint32_t* __restrict__ crit, const uint32_t* __restrict__ exprs,
				      const uint32_t* __restrict__ nodes, const uint32_t* __restrict__ roots,
				      const uint32_t* __restrict__ cfgidx, const uint32_t* __restrict__ cfgnodes,
				      const uint32_t* __restrict__ order, int nc,
				      int nn, int nf, const uint8_t* __restrict__ pkts, int snap,
				      const uint32_t* __restrict__ caplen, const uint32_t* __restrict__ wire, int n,
				      uint8_t* gvals, int smem_vals, uint32_t* __restrict__ bits, int bit_words,
				      uint32_t* __restrict__ counts, unsigned long long* __restrict__ bytesum)
{
	extern __shared__ uint8_t smv[];
	const int lane = threadIdx.x & 31;
	const size_t gtid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	const size_t stride = (size_t)gridDim.x * blockDim.x;
	uint8_t* vals;
	size_t vs;
	if (smem_vals) {
		vals = smv + threadIdx.x;
		vs = blockDim.x;
	} else {
		vals = gvals + gtid;
		vs = stride;
	}
	// The loop is uniform per warp (k0 is the warp's first packet), so that
	// every lane takes part in the ballots.
	for (size_t k0 = gtid - lane; k0 < (size_t)n; k0 += stride) {
		const size_t k = k0 + lane;
		const bool active = k < (size_t)n;
		bool unknown = false;
		Pkt p = {pkts, 0, 0};
		uint32_t wl = 0;
		if (active) {
			p.d = pkts + k * (size_t)snap;
			p.len = caplen[k];
			p.snap = (uint32_t)snap;
			wl = wire[k];
			if (order) {
				uint32_t key[4] = {0xffffffffu, 0, 0, 0}, x = 0;
				bool ok = false;
				for (int j = 0; j < nc; j++) {
					const uint32_t i = __ldg(order + j);
					const uint8_t v = criterion_reuse(crit + 6 * (size_t)i, exprs, p, wl, key, &x, &ok);
					vals[i * vs] = v;
					unknown |= v == V_ABORT;
				}
			} else {
				for (int i = 0; i < nc; i++) {
					const uint8_t v = criterion(crit + 6 * (size_t)i, exprs, p, wl);
					vals[i * vs] = v;
					unknown |= v == V_ABORT;
				}
			}
			if (!unknown) {
				for (int i = 0; i < nn; i++) {
					const uint32_t* nd = nodes + 3 * (size_t)i;
					const uint32_t op = __ldg(nd);
					uint8_t a = vals[__ldg(nd + 1) * vs];
					if (op == 1) // OpAnd
						a &= vals[__ldg(nd + 2) * vs];
					else if (op == 2) // OpOr
						a |= vals[__ldg(nd + 2) * vs];
					else
						a ^= 1;
					vals[(nc + i) * vs] = a;
				}
			}
		}
		uint32_t acc = 0;
		for (int f = 0; f < nf; f++) {
			bool m = false;
			if (active) {
				if (!unknown) {
					m = vals[__ldg(roots + f) * vs] == V_TRUE;
				} else {
					const uint32_t* ix = cfgidx + 4 * (size_t)f;
					const uint32_t first = __ldg(ix), pre = __ldg(ix + 3);
					uint32_t id = __ldg(ix + 2);
					if (pre != 0xffffffffu && vals[pre * vs] == V_ABORT)
						id = 0xffffffffu;
					while (id != 0xfffffffeu && id != 0xffffffffu) {
						const uint32_t* nd = cfgnodes + 3 * (size_t)(first + id);
						const uint8_t v = vals[__ldg(nd) * vs];
						id = v == V_TRUE ? __ldg(nd + 1) : v == V_FALSE ? __ldg(nd + 2) : 0xffffffffu;
					}
					m = id == 0xfffffffeu;
				}
			}
			const uint32_t b = __ballot_sync(0xffffffffu, m);
			if (b) {
				if (bytesum) {
					// Wire lengths are 32-bit: sum the halves apart
					// (32 x 0xffff fits a word).
					const uint32_t w = m ? wl : 0;
					const uint32_t lo = __reduce_add_sync(0xffffffffu, w & 0xffffu);
					const uint32_t hi = __reduce_add_sync(0xffffffffu, w >> 16);
					if (lane == 0)
						atomicAdd(bytesum + f, ((unsigned long long)hi << 16) + lo);
				}
				if (lane == 0)
					atomicAdd(counts + f, __popc(b));
			}
			if (bit_words) {
				acc |= (uint32_t)m << (f & 31);
				if ((f & 31) == 31 || f == nf - 1) {
					if (active)
						bits[k * (size_t)bit_words + (f >> 5)] = acc;
					acc = 0;
				}
			}
		}
	}
}

// ---------------------------------------------------------------------
// gpf_walk: the walk form (package gpu's WalkIndex and its CPU twin
// WalkEvaluator): each filter runs its control-flow form, the criteria
// computed as the walk reaches them, and an index over equality tests
// skips the filters that cannot accept the packet.
//
// ABI: gpf_walk(crit, exprs, cfgidx, cfgnodes, nf, unidx, nun, fields, nk,
//               table, ids, present, ddoff, dd, pkts, snap, caplen, wire, n,
//               bits, bit_words, counts, bytesum, stage)
//   crit, exprs, cfgidx, cfgnodes  the layout's words (filter.Layout);
//   unidx    nun filters walked for every packet (a warp walks each one
//            together);
//   fields   nk (<= WALK_MAX_FIELDS) indexed fields (a filter is listed
//            under each value of the intervals its accepting paths bound a
//            field to: equalities, port ranges), 6 words each: load
//            bits (base<<8 | size<<16), IPv4 header offset, offset, mask,
//            the word offset of the field's hash table in table, its
//            size less one;
//   table    slots of 3 words: key, first, end (of the slot's filters in
//            ids; first == end: empty), linear probing from walk_hash;
//   present  128 words per field: bit (walk_hash(x) >> 20) set when some
//            slot of the field may hold x (a block keeps them in shared
//            memory: the usual value, one no filter tests, costs a bit
//            test instead of a probe);
//   ddoff, dd  per filter its guards, (field, low, high) triples: reached
//            through field k, a filter with a guard of an earlier field
//            whose interval holds the packet's value was walked there, and
//            is skipped;
//   pkts..n  as gpf_filter's; bits, bit_words, counts, bytesum likewise;
//   stage    0: the walks read the rows in device memory; else each warp
//            first copies its 32 rows (snap a multiple of 4) into shared
//            memory with coalesced word loads, stage words apart (odd: the
//            lanes' loads of one offset fall in distinct banks).
// Dynamic shared memory: nk*128 words (present), WALK_Q words per warp (its
// queue), and where stage is set 32*stage words per warp (its rows).
//
// A warp takes 32 packets at a time. Each lane looks its packet's value of
// each indexed field up; the (packet, filter) pairs a field's lookups yield
// are spread over the lanes (a prefix sum of the lanes' list lengths), the
// guards checked, and the pairs kept are appended to the warp's queue in
// shared memory (a ballot compacts them); whenever it holds 32, the warp
// walks them, a pair a lane, and once more for the rest after the last
// field. So the lanes walk together however the pairs fall on the packets.
// The matches are counted per filter by one atomic per group of lanes that
// matched the same filter (__match_any_sync), the bytes summed in the group.
//
// gpf_walk_v1 is the earlier form, kept to compare: the rows read in device
// memory, and each field's pairs walked as soon as they are looked up (most
// lanes idle when few lanes' values are listed). Its ABI is gpf_walk's
// without stage; its static shared memory holds the fields' values.
#define WALK_MAX_FIELDS 16
#define WALK_BLOCK 128
#define CFG_ACCEPT 0xfffffffeu

__device__ __forceinline__ uint32_t walk_hash(uint32_t x) { return (x * 2654435761u) ^ (x >> 16); }

__device__ bool walk_filter(const uint32_t* __restrict__ crit, const uint32_t* __restrict__ exprs,
			    const uint32_t* __restrict__ cfgidx, const uint32_t* __restrict__ cfgnodes, uint32_t f,
			    const Pkt& p, uint32_t wire)
{
	const uint32_t* ix = cfgidx + 4 * (size_t)f;
	const uint32_t first = __ldg(ix), pre = __ldg(ix + 3);
	uint32_t id = __ldg(ix + 2);
	if (pre != 0xffffffffu && criterion(crit + 6 * (size_t)pre, exprs, p, wire) == V_ABORT)
		return false;
	while (id < CFG_ACCEPT) {
		const uint32_t* nd = cfgnodes + 3 * (size_t)(first + id);
		const uint8_t v = criterion(crit + 6 * (size_t)__ldg(nd), exprs, p, wire);
		if (v == V_ABORT)
			return false;
		id = v == V_TRUE ? __ldg(nd + 1) : __ldg(nd + 2);
	}
	return id == CFG_ACCEPT;
}

extern "C" __global__ void __launch_bounds__(WALK_BLOCK)
	gpf_walk_v1(const uint32_t* __restrict__ crit, const uint32_t* __restrict__ exprs, const uint32_t* __restrict__ cfgidx,
		 const uint32_t* __restrict__ cfgnodes, int nf, const uint32_t* __restrict__ unidx, int nun,
		 const uint32_t* __restrict__ fields, int nk, const uint32_t* __restrict__ table,
		 const uint32_t* __restrict__ ids, const uint32_t* __restrict__ present,
		 const uint32_t* __restrict__ ddoff, const uint32_t* __restrict__ dd,
		 const uint8_t* __restrict__ pkts, int snap, const uint32_t* __restrict__ caplen,
		 const uint32_t* __restrict__ wire, int n, uint32_t* bits, int bit_words, uint32_t* __restrict__ counts,
		 unsigned long long* __restrict__ bytesum)
{
	__shared__ uint32_t sval[WALK_MAX_FIELDS][WALK_BLOCK];
	__shared__ uint32_t sok[WALK_BLOCK];
	__shared__ uint32_t spresent[WALK_MAX_FIELDS * 128];
	for (int i = threadIdx.x; i < nk * 128; i += blockDim.x)
		spresent[i] = __ldg(present + i);
	__syncthreads();
	const int lane = threadIdx.x & 31, wbase = threadIdx.x & ~31;
	const size_t stride = (size_t)gridDim.x * blockDim.x;
	const size_t bw = (size_t)bit_words;
	// The loop is uniform per warp (k0 is the warp's first packet).
	for (size_t k0 = (size_t)blockIdx.x * blockDim.x + wbase; k0 < (size_t)n; k0 += stride) {
		const size_t k = k0 + lane;
		const bool active = k < (size_t)n;
		Pkt p = {pkts, 0, 0};
		uint32_t wl = 0;
		if (active) {
			p.d = pkts + k * (size_t)snap;
			p.len = caplen[k];
			p.snap = (uint32_t)snap;
			wl = wire[k];
			for (size_t w = 0; w < bw; w++)
				bits[k * bw + w] = 0;
		}
		for (int i = 0; i < nun; i++) {
			const uint32_t f = __ldg(unidx + i);
			const bool m = active && walk_filter(crit, exprs, cfgidx, cfgnodes, f, p, wl);
			const uint32_t b = __ballot_sync(0xffffffffu, m);
			if (b) {
				if (bytesum) {
					const uint32_t w = m ? wl : 0;
					const uint32_t lo = __reduce_add_sync(0xffffffffu, w & 0xffffu);
					const uint32_t hi = __reduce_add_sync(0xffffffffu, w >> 16);
					if (lane == 0)
						atomicAdd(bytesum + f, ((unsigned long long)hi << 16) + lo);
				}
				if (lane == 0)
					atomicAdd(counts + f, __popc(b));
				if (m && bw)
					bits[k * bw + (f >> 5)] |= 1u << (f & 31);
			}
		}
		uint32_t okmask = 0;
		for (int fk = 0; fk < nk; fk++) {
			const uint32_t* fw = fields + 6 * (size_t)fk;
			uint32_t lo = 0, len = 0;
			if (active) {
				const uint32_t w0 = __ldg(fw);
				uint64_t a;
				uint32_t x = 0;
				const bool ok = addr(p, w0 >> 8 & 0xff, __ldg(fw + 1), __ldg(fw + 2), 0, &a) && ld(p, a, w0 >> 16 & 0xff, &x);
				x &= __ldg(fw + 3);
				sval[fk][threadIdx.x] = x;
				const uint32_t hx = walk_hash(x);
				if (ok)
					okmask |= 1u << fk;
				if (ok && (spresent[fk * 128 + (hx >> 25)] >> (hx >> 20 & 31) & 1)) {
					const uint32_t base = __ldg(fw + 4), mask = __ldg(fw + 5);
					for (uint32_t h = hx & mask;; h = (h + 1) & mask) {
						const uint32_t* s = table + base + 3 * (size_t)h;
						const uint32_t a1 = __ldg(s + 1), a2 = __ldg(s + 2);
						if (a1 == a2)
							break;
						if (__ldg(s) == x) {
							lo = a1;
							len = a2 - a1;
							break;
						}
					}
				}
			}
			sok[threadIdx.x] = okmask;
			if (__ballot_sync(0xffffffffu, len != 0) == 0)
				continue; // no lane's value is listed
			__syncwarp();
			uint32_t incl = len;
			for (int d = 1; d < 32; d <<= 1) {
				const uint32_t y = __shfl_up_sync(0xffffffffu, incl, d);
				if (lane >= d)
					incl += y;
			}
			const uint32_t total = __shfl_sync(0xffffffffu, incl, 31);
			for (uint32_t b0 = 0; b0 < total; b0 += 32) {
				const uint32_t i = b0 + lane;
				int j = 0; // the first lane whose inclusive sum exceeds i
				for (int step = 16; step > 0; step >>= 1) {
					if (__shfl_sync(0xffffffffu, incl, j + step - 1) <= i)
						j += step;
				}
				const uint32_t jlo = __shfl_sync(0xffffffffu, lo, j);
				const uint32_t jstart = __shfl_sync(0xffffffffu, incl, j) - __shfl_sync(0xffffffffu, len, j);
				if (i >= total)
					continue;
				const uint32_t f = __ldg(ids + jlo + (i - jstart));
				const int t = wbase + j;
				const uint32_t okj = sok[t];
				bool skip = false;
				for (uint32_t q = __ldg(ddoff + f), qe = __ldg(ddoff + f + 1); q < qe; q++) {
					const uint32_t* e = dd + 3 * (size_t)q;
					const uint32_t k2 = __ldg(e);
					if (k2 < (uint32_t)fk && (okj >> k2 & 1)) {
						const uint32_t v = sval[k2][t];
						if (v >= __ldg(e + 1) && v <= __ldg(e + 2)) {
							skip = true;
							break;
						}
					}
				}
				if (skip)
					continue;
				const size_t kj = k0 + j;
				const Pkt pj = {pkts + kj * (size_t)snap, caplen[kj], (uint32_t)snap};
				const uint32_t wj = wire[kj];
				if (walk_filter(crit, exprs, cfgidx, cfgnodes, f, pj, wj)) {
					atomicAdd(counts + f, 1u);
					if (bytesum)
						atomicAdd(bytesum + f, (unsigned long long)wj);
					if (bw)
						atomicOr(bits + kj * bw + (f >> 5), 1u << (f & 31));
				}
			}
			__syncwarp();
		}
	}
}

#define WALK_Q 64 // a warp's queue of (packet, filter) pairs (a power of two, >= 63)

// walk_field loads field fw (WalkFieldWords words) of packet p into *x
// (masked; 0 when the load fails) and reports whether the load held.
__device__ __forceinline__ bool walk_field(const uint32_t* __restrict__ fw, const Pkt& p, uint32_t* x)
{
	const uint32_t w0 = __ldg(fw);
	uint64_t a;
	uint32_t v = 0;
	const bool ok = addr(p, w0 >> 8 & 0xff, __ldg(fw + 1), __ldg(fw + 2), 0, &a) && ld(p, a, w0 >> 16 & 0xff, &v);
	*x = v & __ldg(fw + 3);
	return ok;
}

// walk_seen reports whether filter f, reached through field fk, has a guard
// of an earlier field whose interval holds packet p's value (it was walked
// there).
__device__ __forceinline__ bool walk_seen(const uint32_t* __restrict__ fields, const uint32_t* __restrict__ ddoff,
					  const uint32_t* __restrict__ dd, uint32_t f, uint32_t fk, const Pkt& p)
{
	for (uint32_t q = __ldg(ddoff + f), qe = __ldg(ddoff + f + 1); q < qe; q++) {
		const uint32_t* e = dd + 3 * (size_t)q;
		const uint32_t k2 = __ldg(e);
		uint32_t v;
		if (k2 < fk && walk_field(fields + 6 * (size_t)k2, p, &v) && v >= __ldg(e + 1) && v <= __ldg(e + 2))
			return true;
	}
	return false;
}

// walk_count counts the lanes' matches (m: this lane's packet kp, of wire
// length wl, matched filter f): one atomic per filter the warp matched
// (in shared memory where scnt is set), the wire lengths summed over its
// lanes. Every lane calls it.
__device__ __forceinline__ void walk_count(bool m, uint32_t f, uint32_t wl, size_t kp, uint32_t* __restrict__ counts,
					   unsigned long long* __restrict__ bytesum, uint32_t* bits, size_t bw, int scnt,
					   uint32_t* scounts, unsigned long long* sbytes)
{
	const uint32_t mm = __ballot_sync(0xffffffffu, m);
	if (!m)
		return;
	const uint32_t g = __match_any_sync(mm, f);
	const bool leader = (threadIdx.x & 31) == (uint32_t)(__ffs(g) - 1);
	if (bytesum) {
		// Wire lengths are 32-bit: sum the halves apart.
		const uint32_t lo = __reduce_add_sync(g, wl & 0xffffu), hi = __reduce_add_sync(g, wl >> 16);
		if (leader)
			atomicAdd(scnt ? sbytes + f : bytesum + f, ((unsigned long long)hi << 16) + lo);
	}
	if (leader)
		atomicAdd(scnt ? scounts + f : counts + f, (uint32_t)__popc(g));
	if (bw)
		atomicOr(bits + kp * bw + (f >> 5), 1u << (f & 31));
}

// WALK_SERIAL: a field whose lanes' lists hold at most this many filters
// each is queued a filter of each lane at a time; longer lists are spread
// over the lanes by a prefix sum.
#ifndef WALK_SERIAL
#define WALK_SERIAL 4
#endif
// WALK_SCOUNTS: sets of at most this many filters count in shared memory
// (package gpu's walkSharedCounts passes scnt).
#define WALK_SCOUNTS 512

extern "C" __global__ void __launch_bounds__(WALK_BLOCK)
	gpf_walk(const uint32_t* __restrict__ crit, const uint32_t* __restrict__ exprs, const uint32_t* __restrict__ cfgidx,
		 const uint32_t* __restrict__ cfgnodes, int nf, const uint32_t* __restrict__ unidx, int nun,
		 const uint32_t* __restrict__ fields, int nk, const uint32_t* __restrict__ table,
		 const uint32_t* __restrict__ ids, const uint32_t* __restrict__ present,
		 const uint32_t* __restrict__ ddoff, const uint32_t* __restrict__ dd,
		 const uint8_t* __restrict__ pkts, int snap, const uint32_t* __restrict__ caplen,
		 const uint32_t* __restrict__ wire, int n, uint32_t* bits, int bit_words, uint32_t* __restrict__ counts,
		 unsigned long long* __restrict__ bytesum, int stage, int scnt)
{
	extern __shared__ __align__(16) uint32_t wsm[];
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	unsigned long long* sbytes = (unsigned long long*)wsm;
	uint32_t* scounts = wsm + 2 * scnt;
	uint32_t* spresent = scounts + scnt;
	uint32_t* q = spresent + nk * 128 + warp * WALK_Q;
	uint32_t* rows = spresent + nk * 128 + (WALK_BLOCK / 32) * WALK_Q + warp * 32 * stage;
	for (int i = threadIdx.x; i < nk * 128; i += blockDim.x)
		spresent[i] = __ldg(present + i);
	for (int i = threadIdx.x; i < scnt; i += blockDim.x) {
		scounts[i] = 0;
		sbytes[i] = 0;
	}
	__syncthreads();
	const size_t stride = (size_t)gridDim.x * blockDim.x;
	const size_t bw = (size_t)bit_words;
	// Staging: word i = lane + 32m of the warp's rows goes to row i / sw,
	// column i % sw; 32 = qd*sw + rd steps them.
	const uint32_t sw = (uint32_t)snap / 4;
	const uint32_t qd = stage ? 32u / sw : 0, rd = stage ? 32u % sw : 0;
	const uint32_t r0 = stage ? (uint32_t)lane / sw : 0, c0 = stage ? (uint32_t)lane % sw : 0;
	const uint32_t lt = (1u << lane) - 1; // the lanes below this one
	// The loop is uniform per warp (k0 is the warp's first packet).
	for (size_t k0 = (size_t)blockIdx.x * blockDim.x + (threadIdx.x & ~31); k0 < (size_t)n; k0 += stride) {
		const size_t k = k0 + lane;
		const bool active = k < (size_t)n;
		if (stage) {
			__syncwarp(); // the last packets' walks are done with the rows
			const uint32_t* src = (const uint32_t*)(pkts + k0 * (size_t)snap);
			const size_t left = (size_t)n - k0;
			const uint32_t nw = (left < 32 ? (uint32_t)left : 32u) * sw;
			uint32_t r = r0, c = c0;
			for (uint32_t i0 = lane; i0 < nw; i0 += 4 * 32) {
				uint32_t v[4];
#pragma unroll
				for (int u = 0; u < 4; u++)
					v[u] = i0 + 32 * u < nw ? __ldg(src + i0 + 32 * u) : 0;
#pragma unroll
				for (int u = 0; u < 4; u++) {
					if (i0 + 32 * u < nw)
						rows[r * stage + c] = v[u];
					r += qd;
					c += rd;
					if (c >= sw) {
						c -= sw;
						r++;
					}
				}
			}
			__syncwarp();
		}
		// rowp(j): the row of the warp's packet j.
#define rowp(j) (stage ? (const uint8_t*)(rows + (j) * stage) : pkts + (k0 + (j)) * (size_t)snap)
		Pkt p = {pkts, 0, 0};
		uint32_t wl = 0, cl = 0;
		if (active) {
			cl = caplen[k];
			wl = wire[k];
			p.d = rowp(lane);
			p.len = cl;
			p.snap = (uint32_t)snap;
			for (size_t w = 0; w < bw; w++)
				bits[k * bw + w] = 0;
		}
		if (bw)
			__syncwarp();
		for (int i = 0; i < nun; i++) {
			const uint32_t f = __ldg(unidx + i);
			const bool m = active && walk_filter(crit, exprs, cfgidx, cfgnodes, f, p, wl);
			walk_count(m, f, wl, k, counts, bytesum, bits, bw, scnt, scounts, sbytes);
		}
		// The queue: qn pairs from qh (mod WALK_Q), f<<5 | packet; uniform.
		uint32_t qh = 0, qn = 0;
		// enqueue appends this lane's pair (f, packet j) where take holds.
		auto enqueue = [&](bool take, uint32_t f, uint32_t j) {
			const uint32_t tb = __ballot_sync(0xffffffffu, take);
			if (take)
				q[(qh + qn + __popc(tb & lt)) & (WALK_Q - 1)] = f << 5 | j;
			qn += __popc(tb);
		};
		// walk walks cnt (<= qn, <= 32) queued pairs, one a lane.
		auto walk = [&](uint32_t cnt) {
			const bool has = (uint32_t)lane < cnt;
			__syncwarp();
			const uint32_t e = has ? q[(qh + lane) & (WALK_Q - 1)] : 0;
			__syncwarp();
			qh = (qh + cnt) & (WALK_Q - 1);
			qn -= cnt;
			const uint32_t f = e >> 5, j = e & 31;
			const uint32_t jcl = __shfl_sync(0xffffffffu, cl, j), jwl = __shfl_sync(0xffffffffu, wl, j);
			bool m = false;
			if (has) {
				const Pkt pj = {rowp(j), jcl, (uint32_t)snap};
				m = walk_filter(crit, exprs, cfgidx, cfgnodes, f, pj, jwl);
			}
			walk_count(m, f, jwl, k0 + j, counts, bytesum, bits, bw, scnt, scounts, sbytes);
		};
		for (int fk = 0; fk < nk; fk++) {
			uint32_t lo = 0, len = 0;
			if (active) {
				const uint32_t* fw = fields + 6 * (size_t)fk;
				uint32_t x;
				const bool ok = walk_field(fw, p, &x);
				const uint32_t hx = walk_hash(x);
				if (ok && (spresent[fk * 128 + (hx >> 25)] >> (hx >> 20 & 31) & 1)) {
					const uint32_t base = __ldg(fw + 4), mask = __ldg(fw + 5);
					for (uint32_t h = hx & mask;; h = (h + 1) & mask) {
						const uint32_t* s = table + base + 3 * (size_t)h;
						const uint32_t a1 = __ldg(s + 1), a2 = __ldg(s + 2);
						if (a1 == a2)
							break;
						if (__ldg(s) == x) {
							lo = a1;
							len = a2 - a1;
							break;
						}
					}
				}
			}
			const uint32_t mx = __reduce_max_sync(0xffffffffu, len);
			if (mx == 0)
				continue; // no lane's value is listed
			if (mx <= WALK_SERIAL) {
				// Each lane queues one of its filters at a time.
				for (uint32_t r = 0; r < mx; r++) {
					bool take = false;
					uint32_t f = 0;
					if (r < len) {
						f = __ldg(ids + lo + r);
						take = !walk_seen(fields, ddoff, dd, f, (uint32_t)fk, p);
					}
					enqueue(take, f, (uint32_t)lane);
					if (qn >= 32)
						walk(32);
				}
				continue;
			}
			// The lists spread over the lanes: pair i is lane j's where
			// j is the first lane whose inclusive sum exceeds i.
			uint32_t incl = len;
			for (int d = 1; d < 32; d <<= 1) {
				const uint32_t y = __shfl_up_sync(0xffffffffu, incl, d);
				if (lane >= d)
					incl += y;
			}
			const uint32_t total = __shfl_sync(0xffffffffu, incl, 31);
			for (uint32_t b0 = 0; b0 < total; b0 += 32) {
				const uint32_t i = b0 + lane;
				int j = 0;
				for (int step = 16; step > 0; step >>= 1) {
					if (__shfl_sync(0xffffffffu, incl, j + step - 1) <= i)
						j += step;
				}
				const uint32_t jlo = __shfl_sync(0xffffffffu, lo, j);
				const uint32_t jstart = __shfl_sync(0xffffffffu, incl, j) - __shfl_sync(0xffffffffu, len, j);
				const uint32_t jcl = __shfl_sync(0xffffffffu, cl, j);
				bool take = false;
				uint32_t f = 0;
				if (i < total) {
					f = __ldg(ids + jlo + (i - jstart));
					const Pkt pj = {rowp(j), jcl, (uint32_t)snap};
					take = !walk_seen(fields, ddoff, dd, f, (uint32_t)fk, pj);
				}
				enqueue(take, f, (uint32_t)j);
				if (qn >= 32)
					walk(32);
			}
		}
		while (qn > 0)
			walk(qn < 32 ? qn : 32u);
#undef rowp
	}
	if (scnt) {
		__syncthreads();
		for (int f = threadIdx.x; f < scnt; f += blockDim.x) {
			if (scounts[f]) {
				atomicAdd(counts + f, scounts[f]);
				if (bytesum)
					atomicAdd(bytesum + f, sbytes[f]);
			}
		}
	}
}

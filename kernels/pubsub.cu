// CCM content-based matching (Margara and Cugola): the constraints of each
// event attribute's name are evaluated in parallel, every satisfied
// constraint counts one for its filter, and a filter whose count reaches its
// number of constraints marks its interface. The CPU selects each
// attribute's constraints by name (the layout's name table) and the CPU twin
// is package tables/pubsub's EvalLayout over the same words.
//
// ABI: pubsub_match(names, cons, strs, filters, ev_off, attrs, ev_str, n,
//                   cnt_bits, gcnt, gcnt_words, smem_cnt, touched_cap,
//                   port_words, out)
//   names    the names region: constraint offset and count per name index;
//   cons     the constraints region: 3 words per constraint, word 0 =
//            slot<<8 | type<<4 | op, words 1, 2 the value (int64 or float64
//            bits; for a string its byte offset in strs and its length);
//   strs     the strings region, as bytes;
//   filters  the filters region: per slot, port index<<8 | constraints (0:
//            a free slot);
//   ev_off   n+1 offsets: event k's attributes are attrs[4*ev_off[k] ..
//            4*ev_off[k+1]);
//   attrs    4 words per attribute: name index, type, value low, value
//            high (a string: its byte offset in ev_str, its length);
//   cnt_bits 4 or 8: the bits of a filter's counter (4 when no filter has
//            more than 15 constraints);
//   gcnt     gridDim.x slices of gcnt_words words: the counters of each
//            block when smem_cnt is 0 (all zero between events);
//   smem_cnt counter words in dynamic shared memory (0: gcnt is used);
//   touched_cap  slots a block remembers per event in shared memory (the
//            filters whose counter left zero; past it the block scans every
//            counter word);
//   out      port_words words per event: bit p of the event's words is set
//            when a filter of port index p matched.
// A block per event (grid-stride over the events of the launch, so many
// events per launch); the counters are the block's own slice, in shared
// memory when they fit, cleared again by the threads that read them.
// Dynamic shared memory: smem_cnt + touched_cap + port_words + 2 words, then
// 256 bytes for the string value being matched (strings are at most 255
// bytes: pubsub.MaxString).
#include <stdint.h>

__device__ __forceinline__ int cls(uint32_t t) { return t == 2 ? 1 : (int)t; }

__device__ __forceinline__ double as_double(uint32_t t, uint32_t lo, uint32_t hi)
{
	const uint64_t v = (uint64_t)hi << 32 | lo;
	return t == 1 ? (double)(int64_t)v : __longlong_as_double((long long)v);
}

// strcmp3 compares a[0:la] with b[0:lb] in byte order: -1, 0 or 1.
__device__ int strcmp3(const uint8_t* a, uint32_t la, const uint8_t* b, uint32_t lb)
{
	const uint32_t m = la < lb ? la : lb;
	for (uint32_t i = 0; i < m; i++) {
		const uint8_t x = a[i], y = __ldg(b + i);
		if (x != y)
			return x < y ? -1 : 1;
	}
	return la < lb ? -1 : la > lb ? 1 : 0;
}

__device__ bool contains(const uint8_t* a, uint32_t la, const uint8_t* b, uint32_t lb)
{
	if (lb > la)
		return false;
	for (uint32_t i = 0; i + lb <= la; i++) {
		uint32_t j = 0;
		while (j < lb && a[i + j] == __ldg(b + j))
			j++;
		if (j == lb)
			return true;
	}
	return false;
}

// eval is pubsub.Constraint.Eval: event value (at, alo, ahi) against the
// constraint record c.
__device__ bool eval(uint32_t c0, uint32_t c1, uint32_t c2, const uint8_t* __restrict__ strs, uint32_t at, uint32_t alo,
		     uint32_t ahi, const uint8_t* a)
{
	const uint32_t ct = c0 >> 4 & 15, op = c0 & 15;
	if (cls(at) != cls(ct))
		return false;
	const bool str = cls(at) == 3;
	const uint8_t* b = strs + c1;
	const uint32_t la = str ? ahi : 0, lb = str ? c2 : 0;
	switch (op) {
	case 6: // ^=
		return lb <= la && strcmp3(a, lb, b, lb) == 0;
	case 7: // $=
		return lb <= la && strcmp3(a + la - lb, lb, b, lb) == 0;
	case 8: // *=
		return contains(a, la, b, lb);
	}
	int r;
	if (str) {
		r = strcmp3(a, la, b, lb);
	} else if (cls(at) == 1 && !(at == 1 && ct == 1)) {
		const double x = as_double(at, alo, ahi), y = as_double(ct, c1, c2);
		r = x < y ? -1 : x > y ? 1 : 0;
	} else {
		const int64_t x = (int64_t)((uint64_t)ahi << 32 | alo), y = (int64_t)((uint64_t)c2 << 32 | c1);
		r = x < y ? -1 : x > y ? 1 : 0;
	}
	switch (op) {
	case 0:
		return r == 0;
	case 1:
		return r != 0;
	case 2:
		return r < 0;
	case 3:
		return r <= 0;
	case 4:
		return r > 0;
	case 5:
		return r >= 0;
	}
	return false;
}

extern "C" __global__ void pubsub_match(const uint32_t* __restrict__ names, const uint32_t* __restrict__ cons,
					const uint8_t* __restrict__ strs, const uint32_t* __restrict__ filters,
					const uint32_t* __restrict__ ev_off, const uint32_t* __restrict__ attrs,
					const uint8_t* __restrict__ ev_str, int n, int cnt_bits, uint32_t* gcnt,
					int gcnt_words, int smem_cnt, int touched_cap, int port_words,
					uint32_t* __restrict__ out)
{
	extern __shared__ uint32_t sm[];
	uint32_t* cnt = smem_cnt > 0 ? sm : gcnt + (size_t)blockIdx.x * gcnt_words;
	const int cnt_words = smem_cnt > 0 ? smem_cnt : gcnt_words;
	uint32_t* touched = sm + smem_cnt;
	uint32_t* ports = touched + touched_cap;
	uint32_t* ntouched = ports + port_words; // [0] count, [1] overflow
	uint8_t* sstr = reinterpret_cast<uint8_t*>(ntouched + 2); // the attribute's string, 256 bytes
	const int per = 32 / cnt_bits, lg = cnt_bits == 4 ? 3 : 2;
	const uint32_t fmask = (1u << cnt_bits) - 1;
	if (smem_cnt > 0)
		for (int i = threadIdx.x; i < smem_cnt; i += blockDim.x)
			sm[i] = 0;
	for (int i = threadIdx.x; i < port_words; i += blockDim.x)
		ports[i] = 0;
	if (threadIdx.x == 0)
		ntouched[0] = ntouched[1] = 0;
	__syncthreads();
	for (int ev = blockIdx.x; ev < n; ev += gridDim.x) {
		const uint32_t a0 = ev_off[ev], a1 = ev_off[ev + 1];
		for (uint32_t a = a0; a < a1; a++) {
			const uint32_t ni = attrs[4 * a], at = attrs[4 * a + 1], alo = attrs[4 * a + 2],
				       ahi = attrs[4 * a + 3];
			const uint32_t off = names[2 * ni], k = names[2 * ni + 1];
			if (at == 3) { // the string into shared memory (at most 255 bytes)
				for (uint32_t i = threadIdx.x; i < ahi && i < 256; i += blockDim.x)
					sstr[i] = ev_str[alo + i];
				__syncthreads();
			}
			for (uint32_t i = off + threadIdx.x; i < off + k; i += blockDim.x) {
				const uint32_t* c = cons + 3 * (size_t)i;
				const uint32_t c0 = __ldg(c), c1 = __ldg(c + 1), c2 = __ldg(c + 2);
				if (!eval(c0, c1, c2, strs, at, alo, ahi, sstr))
					continue;
				const uint32_t s = c0 >> 8;
				const uint32_t sh = (s & (per - 1)) * cnt_bits;
				const uint32_t old = atomicAdd(&cnt[s >> lg], 1u << sh);
				if ((old >> sh & fmask) == 0) {
					const uint32_t t = atomicAdd(&ntouched[0], 1u);
					if (t < (uint32_t)touched_cap)
						touched[t] = s;
					else
						ntouched[1] = 1;
				}
			}
			if (at == 3)
				__syncthreads(); // before the next string overwrites sstr
		}
		__syncthreads();
		const uint32_t nt = min(ntouched[0], (uint32_t)touched_cap);
		const bool ovf = ntouched[1] != 0; // read here: thread 0 clears it after the next barrier
		for (uint32_t j = threadIdx.x; j < nt; j += blockDim.x) {
			const uint32_t s = touched[j];
			const uint32_t sh = (s & (per - 1)) * cnt_bits;
			const uint32_t old = atomicAnd(&cnt[s >> lg], ~(fmask << sh));
			const uint32_t f = filters[s];
			if ((old >> sh & fmask) == (f & 0xff) && (f & 0xff) != 0)
				atomicOr(&ports[(f >> 8) >> 5], 1u << ((f >> 8) & 31));
		}
		__syncthreads();
		if (ovf) { // more filters than touched_cap: scan every counter
			for (int w = threadIdx.x; w < cnt_words; w += blockDim.x) {
				const uint32_t x = cnt[w];
				if (x == 0)
					continue;
				cnt[w] = 0;
				for (int q = 0; q < per; q++) {
					const uint32_t c = x >> (q * cnt_bits) & fmask;
					if (c == 0)
						continue;
					const uint32_t f = filters[w * per + q];
					if (c == (f & 0xff) && (f & 0xff) != 0)
						atomicOr(&ports[(f >> 8) >> 5], 1u << ((f >> 8) & 31));
				}
			}
			__syncthreads();
		}
		for (int i = threadIdx.x; i < port_words; i += blockDim.x) {
			out[(size_t)ev * port_words + i] = ports[i];
			ports[i] = 0;
		}
		if (threadIdx.x == 0)
			ntouched[0] = ntouched[1] = 0;
		__syncthreads();
	}
}

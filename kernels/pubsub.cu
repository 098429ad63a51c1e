// Content-based matching (CCM's problem, Margara and Cugola): for each event
// of a batch, the ports whose filters (conjunctions of constraints) it
// satisfies. The layout (package tables/pubsub, layout.go) anchors every
// filter on one of its constraints' names, and gives each anchor-list entry
// the filter's 64-bit name signature (bit ni & 63 of each name index ni it
// constrains). A filter can match only if the event has every name it
// constrains, so an event scans the anchor lists of its own names only and
// evaluates a filter only when the event's signature covers the filter's:
// on CCM's default scenario (1M constraints, 100 names, events of 3-5
// attributes) that is about 10K 8-byte signature checks and a handful of
// filter evaluations per event, instead of 40K constraint evaluations and
// 16K counter increments. There are no counters, so nothing is reset
// between events. The CPU twin is tables/pubsub's EvalLayoutAttrs over the
// same words.
//
// ABI: pubsub_match(names, asig, aslot, cons, strs, filters, ev_off, attrs,
//                   ev_str, n, splits, port_words, out, hits, hit_cap)
//   names    per name index: first anchor entry, entries;
//   asig     per anchor entry: the filter's signature (low word, high word;
//            8-byte aligned);
//   aslot    per anchor entry: the filter's slot;
//   cons     filter-major constraint records: word 0 = name<<8 | short<<7
//            | type<<4 | op; a short record (2 words) holds a value that
//            fits one word (an int32, a boolean, a string's offset<<8 |
//            length), a long one (3 words) the value's low and high word
//            (a string: offset, length);
//   strs     the strings region, as bytes;
//   filters  per slot: constraint word offset, port index<<8 | constraints;
//   ev_off   n+1 offsets: event k's attributes are attrs[4*ev_off[k] ..
//            4*ev_off[k+1]);
//   attrs    4 words per attribute: name index, type, value low, value
//            high (a string: its byte offset in ev_str, its length); one
//            attribute per name (the encoder keeps the first);
//   out      port_words words per event, zero on entry: bit p is set when a
//            filter of port index p matched;
//   hits     hits[0], zero on entry, counts the filters that set a port bit
//            first (the one that decided the event's delivery to that
//            port); hits[1 .. 1+hit_cap) receive their slots (for the
//            subscriptions' match counters; past hit_cap only counted).
// Grid: splits blocks per event (block b: event b / splits, part b %
// splits) of 256 threads, the event's anchor lists shared among its blocks
// (small batches use several blocks per event); a 1-D grid of n * splits
// blocks. A block puts the event's attributes, their lists' offsets and
// lengths, its signature and its string bytes in shared memory and walks
// the lists end to end in one strided loop (an event of more than
// ATTR_CAP attributes reads them from device memory, list after list).
#include <stdint.h>

__device__ __forceinline__ int cls(uint32_t t) { return t == 2 ? 1 : (int)t; }

__device__ __forceinline__ double as_double(uint32_t t, uint32_t lo, uint32_t hi)
{
	const uint64_t v = (uint64_t)hi << 32 | lo;
	return t == 1 ? (double)(int64_t)v : __longlong_as_double((long long)v);
}

// strcmp3 compares a[0:la] (the event's string: shared or device memory,
// read through a generic pointer) with b[0:lb] (the layout's, device
// memory) in byte order: -1, 0 or 1.
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

// eval is pubsub.Constraint.Eval: event value (at, alo, ahi; a string's
// bytes at a) against a constraint of type ct, operator op and value words
// c1, c2 (a string: offset in strs, length).
__device__ bool eval(uint32_t ct, uint32_t op, uint32_t c1, uint32_t c2, const uint8_t* __restrict__ strs, uint32_t at,
		     uint32_t alo, uint32_t ahi, const uint8_t* a)
{
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

// filter_ok evaluates a filter's records (from word coff, info&0xff of
// them) against the event's attributes at[4*0 .. 4*na) (name index, type,
// value low, value high; a string's bytes at sbuf + value low - sbase).
__device__ bool filter_ok(const uint32_t* __restrict__ cons, const uint8_t* __restrict__ strs, uint32_t coff,
			  uint32_t info, const uint32_t* at, uint32_t na, const uint8_t* sbuf, uint32_t sbase)
{
	uint32_t o = coff;
	const uint32_t k = info & 0xff;
	for (uint32_t j = 0; j < k; j++) {
		const uint32_t c0 = __ldg(cons + o);
		const uint32_t ct = c0 >> 4 & 7, op = c0 & 15, ni = c0 >> 8;
		uint32_t c1, c2;
		if (c0 & 0x80) {
			const uint32_t w = __ldg(cons + o + 1);
			if (ct == 3) {
				c1 = w >> 8;
				c2 = w & 255;
			} else {
				c1 = w;
				c2 = (uint32_t)((int32_t)w >> 31);
			}
			o += 2;
		} else {
			c1 = __ldg(cons + o + 1);
			c2 = __ldg(cons + o + 2);
			o += 3;
		}
		uint32_t a = 0;
		while (a < na && at[4 * a] != ni)
			a++;
		if (a == na)
			return false;
		const uint32_t t = at[4 * a + 1], alo = at[4 * a + 2], ahi = at[4 * a + 3];
		if (!eval(ct, op, c1, c2, strs, t, alo, ahi, t == 3 ? sbuf + (alo - sbase) : sbuf))
			return false;
	}
	return true;
}

// Shared memory per block: the event's attributes (up to ATTR_CAP, else
// they are read from device memory) and its string bytes (up to STR_CAP).
#define ATTR_CAP 64
#define STR_CAP 2048

// hit records a matched filter: its port's bit in the event's words, and
// the slot if it set the bit first.
__device__ __forceinline__ void hit(uint32_t* out, uint32_t* hits, int hit_cap, uint32_t slot, uint32_t info)
{
	const uint32_t p = info >> 8, bit = 1u << (p & 31);
	const uint32_t old = atomicOr(out + (p >> 5), bit);
	if (!(old & bit)) {
		const uint32_t h = atomicAdd(hits, 1u);
		if (h < (uint32_t)hit_cap)
			hits[1 + h] = slot;
	}
}

// match is pubsub_match's body (also pubsub_match_flag's); every thread of
// a block returns from it.
__device__ __forceinline__ void match(const uint32_t* __restrict__ names, const uint2* __restrict__ asig,
		const uint32_t* __restrict__ aslot, const uint32_t* __restrict__ cons, const uint8_t* __restrict__ strs,
		const uint32_t* __restrict__ filters, const uint32_t* __restrict__ ev_off,
		const uint32_t* __restrict__ attrs, const uint8_t* __restrict__ ev_str, int n, int splits, int port_words,
		uint32_t* out, uint32_t* hits, int hit_cap)
{
	__shared__ uint32_t s_at[4 * ATTR_CAP];
	__shared__ uint32_t s_off[ATTR_CAP], s_pre[ATTR_CAP + 1];
	__shared__ uint32_t s_sig[2], s_str_lo, s_str_hi;
	__shared__ __align__(16) uint8_t s_str[STR_CAP];
	const uint32_t first = (blockIdx.x % splits) * blockDim.x + threadIdx.x, step = splits * blockDim.x;
	const int ev = blockIdx.x / splits;
	if (ev >= n)
		return; // uniform per block
	const uint32_t a0 = __ldg(ev_off + ev), a1 = __ldg(ev_off + ev + 1), na = a1 - a0;
	uint32_t* eout = out + (size_t)ev * port_words;
	if (na <= ATTR_CAP) {
		// The attributes, their lists and the signature into shared
		// memory; then one strided loop over the lists end to end.
		if (threadIdx.x == 0) {
			s_sig[0] = s_sig[1] = 0;
			s_str_lo = 0xffffffffu;
			s_str_hi = 0;
		}
		__syncthreads();
		if (threadIdx.x < na) {
			const uint32_t* r = attrs + 4 * (size_t)(a0 + threadIdx.x);
			const uint32_t ni = __ldg(r), t = __ldg(r + 1), lo = __ldg(r + 2), hi = __ldg(r + 3);
			s_at[4 * threadIdx.x] = ni;
			s_at[4 * threadIdx.x + 1] = t;
			s_at[4 * threadIdx.x + 2] = lo;
			s_at[4 * threadIdx.x + 3] = hi;
			s_off[threadIdx.x] = __ldg(names + 2 * (size_t)ni);
			s_pre[threadIdx.x + 1] = __ldg(names + 2 * (size_t)ni + 1);
			atomicOr(&s_sig[ni >> 5 & 1], 1u << (ni & 31));
			if (t == 3) {
				atomicMin(&s_str_lo, lo);
				atomicMax(&s_str_hi, lo + hi);
			}
		}
		__syncthreads();
		if (threadIdx.x == 0) {
			s_pre[0] = 0;
			for (uint32_t j = 0; j < na; j++)
				s_pre[j + 1] += s_pre[j];
		}
		const uint32_t slo = s_str_lo, shi = s_str_hi;
		const bool sm_str = slo < shi && shi - slo <= STR_CAP;
		if (sm_str)
			for (uint32_t i = threadIdx.x; i < shi - slo; i += blockDim.x)
				s_str[i] = __ldg(ev_str + slo + i);
		__syncthreads();
		const uint8_t* sbuf = sm_str ? s_str : ev_str;
		const uint32_t sbase = sm_str ? slo : 0;
		const uint32_t sig0 = s_sig[0], sig1 = s_sig[1], total = s_pre[na];
		uint32_t j = 0;
		for (uint32_t i = first; i < total; i += step) {
			while (i >= s_pre[j + 1])
				j++;
			const uint32_t e = s_off[j] + (i - s_pre[j]);
			const uint2 s = __ldg(asig + e);
			if ((s.x & ~sig0) | (s.y & ~sig1))
				continue;
			const uint32_t slot = __ldg(aslot + e);
			const uint32_t coff = __ldg(filters + 2 * (size_t)slot), info = __ldg(filters + 2 * (size_t)slot + 1);
			if ((info & 0xff) != 0 && filter_ok(cons, strs, coff, info, s_at, na, sbuf, sbase))
				hit(eout, hits, hit_cap, slot, info);
		}
		return;
	}
	// Many attributes: read from device memory, one list after another.
	uint32_t sig0 = 0, sig1 = 0;
	for (uint32_t a = a0; a < a1; a++) {
		const uint32_t ni = __ldg(attrs + 4 * a);
		if (ni & 32)
			sig1 |= 1u << (ni & 31);
		else
			sig0 |= 1u << (ni & 31);
	}
	const uint32_t* at = attrs + 4 * (size_t)a0;
	for (uint32_t a = a0; a < a1; a++) {
		const uint32_t ni = __ldg(attrs + 4 * a);
		const uint32_t off = __ldg(names + 2 * ni), k = __ldg(names + 2 * ni + 1);
		for (uint32_t i = first; i < k; i += step) {
			const uint2 s = __ldg(asig + off + i);
			if ((s.x & ~sig0) | (s.y & ~sig1))
				continue;
			const uint32_t slot = __ldg(aslot + off + i);
			const uint32_t coff = __ldg(filters + 2 * (size_t)slot), info = __ldg(filters + 2 * (size_t)slot + 1);
			if ((info & 0xff) != 0 && filter_ok(cons, strs, coff, info, at, na, ev_str, 0))
				hit(eout, hits, hit_cap, slot, info);
		}
	}
}

extern "C" __global__ void __launch_bounds__(256) pubsub_match(const uint32_t* __restrict__ names,
		const uint2* __restrict__ asig, const uint32_t* __restrict__ aslot, const uint32_t* __restrict__ cons,
		const uint8_t* __restrict__ strs, const uint32_t* __restrict__ filters, const uint32_t* __restrict__ ev_off,
		const uint32_t* __restrict__ attrs, const uint8_t* __restrict__ ev_str, int n, int splits, int port_words,
		uint32_t* out, uint32_t* hits, int hit_cap)
{
	match(names, asig, aslot, cons, strs, filters, ev_off, attrs, ev_str, n, splits, port_words, out, hits, hit_cap);
}

// pubsub_match_upd is pubsub_match with a live update's words written
// first (gpu/pubsub_live_cuda.go): img[poff[i]] = pval[i] for i < npairs
// (offsets global and unique). The block that takes ticket 0 of tick[0]
// writes them and then stores epoch in tick[1]; every other block waits
// for tick[1] to reach epoch before it reads the layout, so the whole
// batch sees the whole update. The writer is whichever block runs first,
// so no block waits for one that has not started. The block that takes
// the last ticket sets tick[0] back to zero for the next launch in the
// stream (tick is the stream's own pair of words: launches in one stream
// do not overlap). Other streams that must follow the update wait for
// tick[1] (cuStreamWaitValue32, wrap-safe GEQ: epoch only grows).
extern "C" __global__ void __launch_bounds__(256) pubsub_match_upd(const uint32_t* __restrict__ names,
		const uint2* __restrict__ asig, const uint32_t* __restrict__ aslot, const uint32_t* __restrict__ cons,
		const uint8_t* __restrict__ strs, const uint32_t* __restrict__ filters, const uint32_t* __restrict__ ev_off,
		const uint32_t* __restrict__ attrs, const uint8_t* __restrict__ ev_str, int n, int splits, int port_words,
		uint32_t* out, uint32_t* hits, int hit_cap, uint32_t* img, const uint32_t* poff, const uint32_t* pval,
		int npairs, uint32_t* tick, uint32_t epoch)
{
	__shared__ uint32_t s_t;
	if (threadIdx.x == 0)
		s_t = atomicAdd(tick, 1u);
	__syncthreads();
	const uint32_t t = s_t;
	if (t == 0) {
		for (int i = threadIdx.x; i < npairs; i += blockDim.x)
			img[poff[i]] = pval[i];
		__threadfence();
		__syncthreads();
		if (threadIdx.x == 0)
			atomicExch(tick + 1, epoch);
	} else {
		if (threadIdx.x == 0) {
			while ((int)(*(volatile uint32_t*)(tick + 1) - epoch) < 0)
				__nanosleep(32);
			__threadfence();
		}
		__syncthreads();
	}
	if (threadIdx.x == 0 && t == gridDim.x - 1)
		atomicExch(tick, 0u);
	match(names, asig, aslot, cons, strs, filters, ev_off, attrs, ev_str, n, splits, port_words, out, hits, hit_cap);
}

// pubsub_match_flag is pubsub_match for the small-batch path's flag mode:
// the same 15 parameters, then done (a device word, zero on entry, left
// zero), hout (page-locked host memory mapped into the device) and flag (a
// word of it) and seq. The block that finishes last (done counts them)
// copies the answers (n * port_words words, hits[0] and the first
// min(hits[0], hit_cap) slots, laid out as out and hits are) to hout, then
// writes seq to *flag after a system-wide fence: the host polls the flag
// and needs no copy back and no event.
extern "C" __global__ void __launch_bounds__(256) pubsub_match_flag(const uint32_t* __restrict__ names,
		const uint2* __restrict__ asig, const uint32_t* __restrict__ aslot, const uint32_t* __restrict__ cons,
		const uint8_t* __restrict__ strs, const uint32_t* __restrict__ filters, const uint32_t* __restrict__ ev_off,
		const uint32_t* __restrict__ attrs, const uint8_t* __restrict__ ev_str, int n, int splits, int port_words,
		uint32_t* out, uint32_t* hits, int hit_cap, uint32_t* done, uint32_t* hout, volatile uint32_t* flag,
		uint32_t seq)
{
	__shared__ uint32_t s_last;
	match(names, asig, aslot, cons, strs, filters, ev_off, attrs, ev_str, n, splits, port_words, out, hits, hit_cap);
	__syncthreads();
	if (threadIdx.x == 0) {
		__threadfence();
		s_last = atomicAdd(done, 1u) == gridDim.x - 1;
	}
	__syncthreads();
	if (!s_last)
		return;
	__threadfence();
	const uint32_t pw = (uint32_t)n * (uint32_t)port_words;
	const uint32_t h = __ldcg(hits), nh = 1 + (h < (uint32_t)hit_cap ? h : (uint32_t)hit_cap);
	for (uint32_t i = threadIdx.x; i < pw; i += blockDim.x)
		hout[i] = __ldcg(out + i);
	for (uint32_t i = threadIdx.x; i < nh; i += blockDim.x)
		hout[pw + i] = __ldcg(hits + i);
	__threadfence_system();
	__syncthreads();
	if (threadIdx.x == 0) {
		*done = 0;
		__threadfence_system();
		*flag = seq;
	}
}

// Resident flow lookups, for gswitch's gpu package (gpu/resident_cuda.go):
// a kernel that stays on the device and takes small lookups from a mailbox
// in page-locked host memory, so that a lookup costs the host two stores
// and the reads of a completion word: no kernel launch, no driver call, no
// lock of the driver's, and no completion interrupt.
//
// The mailbox is an array of slots of RS_WORDS 32-bit words (128 bytes,
// a cache line pair of its own), slot b watched by block b alone. The host
// fills a slot's fields (keys, results, image, descriptor and completion
// word addresses, key count and stride, the completion value) and then
// stores the request number into RS_REQ; the lane 0 of the block's warp 0 polls RS_REQ
// and RS_STOP together (one 64-bit acquire load from host memory), runs
// the lookup with the whole block (the keys copied into shared memory, a
// warp per packet, as classify_warp; linear images a thread per packet),
// and once every result is written
// (each thread's writes fenced at system scope, then a barrier) stores the
// completion value into the batch's completion word, which the host polls
// (gpu.Batch.Ready/Wait), and the request number into RS_DONE, where a
// block of the next launch starts.
//
// A launch stays while it has work: it leaves once no slot has had a
// request for idle_ns nanoseconds (the device's global timer), all its
// blocks together (the first to see the idle time says so in rs_grid, and
// the others leave at their next look: a block that left alone would
// leave its slot's next request waiting for the others to go idle), or at
// once when the host sets RS_STOP (gpu's Close and its device frees, whose
// implicit synchronisation would otherwise wait for it). Under traffic it
// is never launched again; after an idle spell the host launches again
// when a request finds no launch alive (a word the stream writes after
// each launch). (A launch that ended a fixed life after its start, its
// blocks one by one as their slots went idle, had 8 callers' lookups of 4
// keys 25 µs apart wait 239 µs at the p99 with a life of 2 ms, 19 µs with
// 20 ms: H200, BenchmarkCUDAResidentLatency, 2026-11-27.)
//
// The tables must not change under a launch: the SMs' L1 and read-only
// caches, which the walk needs (a build that read the tables around them,
// from L2 only, took 84-89 µs a lookup of about 22 keys against the CPU's
// 54), are not coherent with the update scatter's writes, and are
// invalidated only between launches. So the host stops the kernel and
// launches it again before it posts a lookup of a newer version of the
// tables (RS_VER, its count of image loads and scatters), and posts only
// once every scatter it queued is done (a word the update stream writes
// after each): a lookup sees every update applied before its Submit. Keys
// and the mailbox are read with volatile loads (__ldcv): host memory that
// the host rewrites between requests.
//
// Build (see the Makefile's kernels target):
//   nvcc -ptx -arch=sm_90      -o resident_sm90.ptx      resident.cu
//   nvcc -ptx -arch=compute_80 -o resident_compute80.ptx resident.cu
#define FLOW_NO_KERNELS // flow.cu's device functions, not its kernels
#include "flow.cu"

// Slot words (gpu/resident_cuda.go mirrors them).
#define RS_REQ 0     // host: the request number (nonzero, changes per request)
#define RS_STOP 1    // host: nonzero: leave now (read with RS_REQ as one 64-bit word)
#define RS_DONE 2    // device: the last request number served
#define RS_N 3       // keys
#define RS_STRIDE 4  // words between two key columns (the batch's capacity)
#define RS_FSEQ 5    // the completion value
#define RS_IMG 6     // 64-bit addresses from here on: the image,
#define RS_DESC 8    // its descriptor,
#define RS_KEYS 10   // the keys (structure of arrays),
#define RS_OUT 12    // the results,
#define RS_FLAG 14   // the completion word,
#define RS_VER 16    // and the version of the tables (the host's count of image loads and scatters)
#define RS_SVC 18    // device, 64-bit, after the completion word: the request number << 32 | staged << 31 | service ns
#define RS_WORDS 32

// The launch's shared state: the global time of the last request any
// block took, and whether the blocks are leaving. The host zeroes it
// before each launch (cuMemsetD32Async on the launch's stream).
__device__ unsigned long long rs_grid[2];
#define RS_MAXN 64   // the most keys of a request (the host's residentKeys)
#define RS_THREADS 512
static_assert(RS_WORDS == 32, "warp 0 reads a slot a word a lane");

__device__ __forceinline__ uint64_t ld_acquire_sys(const uint64_t* p)
{
	uint64_t v;
	asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
	return v;
}

__device__ __forceinline__ uint64_t global_ns()
{
	uint64_t t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

__device__ __forceinline__ uint64_t word64(const uint32_t* h, int i)
{
	return (uint64_t)h[i] | (uint64_t)h[i + 1] << 32;
}

// resident_one runs one request's lookups with the whole block, the keys
// in shared memory (ks, column j of packet i at ks[j*RS_MAXN+i]).
template <int P>
__device__ void resident_one(const uint32_t* __restrict__ img, const uint32_t* d, const ftab& f,
			     const uint32_t* ks, uint32_t* out, int n)
{
	uint32_t pk[P > 0 ? P : 1];
	if (d[D_ALGO] == ALGO_LINEAR) {
		for (int i = threadIdx.x; i < n; i += blockDim.x) {
#pragma unroll
			for (int j = 0; j < P; j++)
				pk[j] = ks[j * RS_MAXN + i];
			const uint64_t best = flow_linear<P>(img, d, pk);
			out[i] = best == 0 ? EMPTY_ID : ~(uint32_t)best;
		}
		return;
	}
	for (int i = threadIdx.x >> 5; i < n; i += blockDim.x >> 5) { // uniform in the warp
#pragma unroll
		for (int j = 0; j < P; j++)
			pk[j] = ks[j * RS_MAXN + i];
		const uint64_t best = warp_walk<P>(f, pk);
		if ((threadIdx.x & 31) == 0)
			out[i] = best == 0 ? EMPTY_ID : ~(uint32_t)best;
	}
}

// flow_resident: a block per slot of the mailbox slots (see above); the
// launch's dynamic shared memory holds what a table's descriptor stages
// (setup, as flow_lookup). A block stages a table once and again only
// when a request names another image, descriptor or version (RS_VER: the
// host's count of image loads and scatters), so that a request's walk
// reads the classes from shared memory, as flow_lookup's does, without
// copying them in first (within a launch the version does not change:
// the image and descriptor are what may).
extern "C" __global__ void __launch_bounds__(RS_THREADS, 1)
flow_resident(uint32_t* slots, unsigned long long idle_ns)
{
	__shared__ uint32_t h[RS_WORDS];
	__shared__ uint32_t d[FLOW_DESC];
	__shared__ uint32_t ks[FLOW_KEYWORDS * RS_MAXN];
	__shared__ int go;
	uint32_t* s = slots + (size_t)blockIdx.x * RS_WORDS;
	volatile uint32_t* vs = s;
	volatile unsigned long long* grid = rs_grid;
	uint32_t last = 0, req = 0; // warp 0's, the same in its lanes
	uint64_t simg = 0, sdesc = 0, sver = 0; // what is staged (simg 0: nothing); uniform in the block
	uint64_t t0 = 0; // thread 0's: when it saw the request
	ftab tf;
	if (threadIdx.x < 32)
		last = vs[RS_DONE];
	if (threadIdx.x == 0)
		atomicMax(&rs_grid[0], (unsigned long long)global_ns()); // the launch counts as activity
	for (;;) {
		// Warp 0 waits for a request: lane 0 polls, then each lane reads
		// a word of the slot, all 32 loads from host memory in flight at
		// once (one thread's volatile loads go one after another: 29 of
		// them took about 70 µs a request).
		if (threadIdx.x < 32) {
			const unsigned full = 0xFFFFFFFFu;
			int g = 0;
			for (uint32_t spin = 0;; spin++) {
				uint64_t rs = 0;
				if (threadIdx.x == 0)
					rs = ld_acquire_sys((const uint64_t*)(s + RS_REQ));
				rs = __shfl_sync(full, rs, 0);
				req = (uint32_t)rs;
				if (req != last) {
					g = 1;
					break;
				}
				if ((uint32_t)(rs >> 32) != 0)
					break;
				if ((spin & 7) == 0) { // a poll is a PCIe read: about 1 µs
					int leave = 0;
					if (threadIdx.x == 0) {
						const uint64_t now = global_ns(), at = grid[0]; // another block may have written a later time
						leave = grid[1] != 0;
						if (!leave && now > at && now - at > idle_ns) {
							grid[1] = 1;
							leave = 1;
						}
					}
					if (__shfl_sync(full, leave, 0))
						break;
				}
				__nanosleep(64);
			}
			__syncwarp(); // lane 0's acquire before every lane's reads
			if (g)
				h[threadIdx.x] = __ldcv(&s[threadIdx.x]);
			if (threadIdx.x == 0) {
				go = g;
				t0 = global_ns();
			}
		}
		__syncthreads();
		if (!go)
			return; // uniform
		const int n = min(h[RS_N], (uint32_t)RS_MAXN), stride = (int)h[RS_STRIDE];
		const uint64_t img = word64(h, RS_IMG), desc = word64(h, RS_DESC), ver = word64(h, RS_VER);
		const uint32_t* keys = (const uint32_t*)word64(h, RS_KEYS);
		uint32_t* out = (uint32_t*)word64(h, RS_OUT);
		const bool staged = img != simg || desc != sdesc || ver != sver; // uniform
		if (staged) {
			const uint32_t* dp = (const uint32_t*)desc;
			for (int i = threadIdx.x; i < FLOW_DESC; i += blockDim.x)
				d[i] = dp[i];
			__syncthreads();
			if (d[D_ALGO] != ALGO_LINEAR) // uniform: every thread reaches setup's barrier
				setup(tf, (const uint32_t*)img, d, smem);
			simg = img, sdesc = desc, sver = ver;
		}
		// The keys into shared memory, the whole block's loads from host
		// memory in flight at once.
		const uint32_t p = min(d[D_P], (uint32_t)FLOW_KEYWORDS);
		for (uint32_t k = threadIdx.x; k < p * (uint32_t)n; k += blockDim.x) {
			const uint32_t j = k / n, i = k % n;
			ks[j * RS_MAXN + i] = __ldcv(&keys[(size_t)j * stride + i]);
		}
		__syncthreads();
		switch (p) {
#define CASE(P) \
	case P:     \
		resident_one<P>((const uint32_t*)img, d, tf, ks, out, n); \
		break;
		CASE(0) CASE(1) CASE(2) CASE(3) CASE(4) CASE(5) CASE(6) CASE(7) CASE(8) CASE(9) CASE(10) CASE(11) CASE(12)
		CASE(13) CASE(14) CASE(15) CASE(16) CASE(17) CASE(18) CASE(19) CASE(20) CASE(21) CASE(22) CASE(23) CASE(24)
		CASE(25) CASE(26) CASE(27)
#undef CASE
		}
		__threadfence_system(); // this thread's results, before the completion word
		__syncthreads();
		if (threadIdx.x == 0) {
			const uint64_t now = global_ns(), ns = min(now - t0, (uint64_t)0x7FFFFFFF);
			volatile uint32_t* flag = (volatile uint32_t*)word64(h, RS_FLAG);
			*flag = h[RS_FSEQ];
			vs[RS_DONE] = req;
			// The service time, for the host's diagnostics (one 64-bit
			// store: the request number and its time seen together).
			*(volatile uint64_t*)(s + RS_SVC) = (uint64_t)req << 32 | (uint64_t)staged << 31 | ns;
			atomicMax(&rs_grid[0], (unsigned long long)now);
		}
		last = req; // warp 0's (the others' are unused)
		// The next request's header is written by thread 0 only after
		// every thread has passed this iteration's reads of h.
		__syncthreads();
	}
}

// rabin_variants.cu: kernel-only timings of kernels/rabin.cu's variants on
// 1,460-byte payloads (CUDA events, the median of 7 timed runs of 10
// launches), each checked bit for bit against a CPU reference, and the
// PCIe copy bandwidth of pinned host memory (the end-to-end ceiling). The
// device-machine script builds it once per variant:
//
//   nvcc -O3 -arch=sm_90 -DRABIN_SRC='"../../../kernels/rabin.cu"' -o v_new rabin_variants.cu
//   nvcc ... -DRABIN_PREFETCH=0 ...              (no prefetch of the next block)
//   nvcc ... -DRABIN_SRC='"rabin_v0.cu"' -DV0     (the kernel before 2026-11-26: a thread per payload)
//
// and runs: ./v_new TABS W PAYLOADS PARTS,... BLOCK,... LABEL, or ./v_new --copy.
// TABS is rabin.Marker's tables (TableWords: 512 words, then the shift as a
// 32-bit word and the mask as a 64-bit one, little-endian).
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <vector>
#include RABIN_SRC

#define CK(x)                                                                                      \
	do {                                                                                       \
		cudaError_t e_ = (x);                                                              \
		if (e_ != cudaSuccess) {                                                           \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

static float median(std::vector<float> v)
{
	std::sort(v.begin(), v.end());
	return v[v.size() / 2];
}

static int copy_bandwidth()
{
	const size_t n = 256u << 20;
	void *h, *d;
	CK(cudaHostAlloc(&h, n, cudaHostAllocDefault));
	CK(cudaMalloc(&d, n));
	memset(h, 1, n);
	cudaStream_t s;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	cudaEvent_t a, b;
	CK(cudaEventCreate(&a));
	CK(cudaEventCreate(&b));
	for (int dir = 0; dir < 2; dir++) {
		std::vector<float> ms;
		for (int r = 0; r < 6; r++) {
			CK(cudaEventRecord(a, s));
			for (int i = 0; i < 4; i++)
				CK(cudaMemcpyAsync(dir ? h : d, dir ? d : h, n, dir ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice, s));
			CK(cudaEventRecord(b, s));
			CK(cudaEventSynchronize(b));
			float t;
			CK(cudaEventElapsedTime(&t, a, b));
			if (r > 0)
				ms.push_back(t);
		}
		float t = median(ms);
		printf("COPY %s pinned 4 x %zu MiB: %.1f GB/s = %.0f Gbit/s\n", dir ? "D2H" : "H2D", n >> 20,
		       4.0 * n / t / 1e6, 4.0 * n * 8 / t / 1e6);
	}
	return 0;
}

int main(int argc, char** argv)
{
	if (argc > 1 && !strcmp(argv[1], "--copy"))
		return copy_bandwidth();
	if (argc < 7) {
		fprintf(stderr, "usage: %s TABS W PAYLOADS PARTS,... BLOCK,... LABEL | --copy\n", argv[0]);
		return 2;
	}
	const int W = atoi(argv[2]), N = atoi(argv[3]);
	const int plen = 1460, stride = 1472;
	std::vector<uint64_t> tabs(512);
	uint32_t shift;
	uint64_t mask;
	FILE* fp = fopen(argv[1], "rb");
	if (!fp || fread(tabs.data(), 8, 512, fp) != 512 || fread(&shift, 4, 1, fp) != 1 || fread(&mask, 8, 1, fp) != 1) {
		fprintf(stderr, "%s: cannot read the tables\n", argv[1]);
		return 2;
	}
	fclose(fp);
	const size_t bytes = (size_t)N * stride;
	std::vector<uint8_t> buf(bytes, 0);
	std::vector<uint32_t> offs(N), lens(N, plen);
	uint64_t x = 0x9e3779b97f4a7c15ull;
	for (int k = 0; k < N; k++) {
		offs[k] = (uint32_t)k * stride;
		for (int j = 0; j < plen; j++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			buf[offs[k] + j] = (uint8_t)(x >> 24);
		}
	}
	// The CPU reference: rabin.Marker.Bitmap's definition, rolled.
	const size_t words = bytes / 32;
	std::vector<uint32_t> want(words, 0);
	long markers = 0;
	for (int k = 0; k < N; k++) {
		uint64_t f = 0;
		const uint8_t* p = &buf[offs[k]];
		for (int i = 0; i < plen; i++) {
			f = (f << 8 | p[i]) ^ tabs[256 + (f >> shift)];
			if (i + 1 >= W) {
				if ((f & mask) == 0)
					want[(offs[k] + i) >> 5] |= 1u << ((offs[k] + i) & 31), markers++;
				f ^= tabs[p[i + 1 - W]];
			}
		}
	}
	uint8_t* dbuf;
	uint32_t *doffs, *dlens, *dbm;
	uint64_t* dtabs;
	CK(cudaMalloc(&dbuf, bytes + 64));
	CK(cudaMalloc(&doffs, 4 * N));
	CK(cudaMalloc(&dlens, 4 * N));
	CK(cudaMalloc(&dbm, 4 * words));
	CK(cudaMalloc(&dtabs, 8 * 512));
	CK(cudaMemcpy(dbuf, buf.data(), bytes, cudaMemcpyHostToDevice));
	CK(cudaMemset(dbuf + bytes, 0, 64));
	CK(cudaMemcpy(doffs, offs.data(), 4 * N, cudaMemcpyHostToDevice));
	CK(cudaMemcpy(dlens, lens.data(), 4 * N, cudaMemcpyHostToDevice));
	CK(cudaMemcpy(dtabs, tabs.data(), 8 * 512, cudaMemcpyHostToDevice));
	cudaEvent_t a, b;
	CK(cudaEventCreate(&a));
	CK(cudaEventCreate(&b));
	std::vector<uint32_t> got(words);
	for (char* ps = argv[4]; ps && *ps;) {
		const int parts = atoi(ps);
		ps = strchr(ps, ',');
		ps = ps ? ps + 1 : nullptr;
		for (char* bs = argv[5]; bs && *bs;) {
			const int block = atoi(bs);
			bs = strchr(bs, ',');
			bs = bs ? bs + 1 : nullptr;
			const int grid = (int)(((long)N * parts + block - 1) / block);
			auto launch = [&]() {
#ifdef V0
				(void)parts;
				rabin_markers_w32<<<(N + block - 1) / block, block>>>(dbuf, doffs, dlens, N, dtabs, W, shift,
					(uint32_t)mask, (uint32_t)(mask >> 32), dbm);
#else
				if (W == 32)
					rabin_markers_w32<<<grid, block>>>(dbuf, doffs, dlens, N, dtabs, W, shift, (uint32_t)mask,
									   (uint32_t)(mask >> 32), dbm, parts);
				else
					rabin_markers_w48<<<grid, block>>>(dbuf, doffs, dlens, N, dtabs, W, shift, (uint32_t)mask,
									   (uint32_t)(mask >> 32), dbm, parts);
#endif
			};
			CK(cudaMemset(dbm, 0xff, 4 * words));
			launch();
			CK(cudaGetLastError());
			CK(cudaDeviceSynchronize());
			CK(cudaMemcpy(got.data(), dbm, 4 * words, cudaMemcpyDeviceToHost));
			size_t bad = 0;
			for (size_t i = 0; i < words; i++)
				bad += got[i] != want[i];
			std::vector<float> ms;
			for (int r = 0; r < 8; r++) {
				CK(cudaEventRecord(a));
				for (int i = 0; i < 10; i++)
					launch();
				CK(cudaEventRecord(b));
				CK(cudaEventSynchronize(b));
				CK(cudaGetLastError());
				float t;
				CK(cudaEventElapsedTime(&t, a, b));
				if (r > 0)
					ms.push_back(t / 10);
			}
			const float t = median(ms);
			printf("KERNEL %-12s w=%d payloads=%d parts=%d block=%d: %.4f ms %.0f Gbit/s  %.2f markers/payload  %s\n",
			       argv[6], W, N, parts, block, t, (double)N * plen * 8 / t / 1e6, (double)markers / N,
			       bad ? "MISMATCH" : "identical");
			if (bad)
				printf("  %zu words differ\n", bad);
		}
	}
	return 0;
}

// Package re is "gswitchctl bench re": the Rabin fingerprinting of
// redundancy elimination (tables/rabin, datapath/re) and the
// content-defined chunker of "gswitchctl chunk" against
// github.com/restic/chunker v0.4.0.
//
// # What it measures
//
// markers (one Result per backend): --payloads payloads of --payload-bytes
// bytes (default 1,460, a full TCP segment; random bytes from --seed), each
// fingerprinted on its own with the marker window and bits of the WAN port
// (--window, --bits, --pol). On the CPU (one goroutine), gbps is the
// payload bits per second of Marker.Markers on each payload in turn (what
// the encoder does per frame), gbps_bitmap the same payloads packed into
// the indexed compact buffer (rabin.Pack) and marked with Marker.Bitmap
// (the kernel's CPU twin); markers_per_payload is the mean number of
// markers found. With --backend gpu the payloads go through the GPU's
// marker kernel (kernels/rabin.cu) through the GPUMarkers seam: gbps end to
// end, from the payloads (Go slices) to the bitmap in host memory through a
// gpu.MarkerPipeline (--gpu-fillers goroutines packing page-locked batches
// of --gpu-batch-bytes, copy in, kernel and copy out over --gpu-streams
// streams; --gpu-sleep, --gpu-flat-start: the variants measured against the
// defaults; gpu_shape says which ran), gbps_kernel the kernel alone on the
// whole packed buffer, gbps_h2d and gbps_d2h the PCIe copy rates of pinned
// memory in the same run (the end-to-end ceiling), gbps_cpu the CPU figure
// of the same run, and every bitmap (the warm-up's and the timed rounds')
// is compared with the CPU's.
// A build without the GPU glue has NewGPUMarkers nil, and --backend gpu is
// a usage error there.
//
// chunk (one Result per data set of --data: random, text, zeros): --bytes
// bytes cut into content-defined chunks by tables/rabin's Chunker and by
// restic/chunker (NewWithBoundaries, SetAverageBits) with the same
// polynomial, --min, --max and --avg-bits, both reading a bytes.Reader, in
// alternating order each round; mbps and restic_mbps are their medians
// (MB = 10^6 bytes), ratio = mbps / restic_mbps, and identical says that
// every chunk's start, length and cut fingerprint agreed (a difference is an
// error wrapping benchutil.ErrMismatch).
//
// Rates are medians over --rounds rounds: one slow round on a shared
// machine moves the median little.
//
// # JSON
//
// With --json, one Result per line; the keys are its fields' json tags.
package re

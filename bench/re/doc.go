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
// end, from the payloads in host memory to the bitmap in host memory through a
// gpu.MarkerPipeline (--gpu-fillers goroutines packing page-locked batches
// of --gpu-batch-bytes, copy in, kernel and copy out over --gpu-streams
// streams; --gpu-sleep, --gpu-flat-start, --gpu-ramp-down: the variants
// measured against the defaults; gpu_shape says which ran), gbps_kernel the kernel alone on the
// whole packed buffer, gbps_h2d and gbps_d2h the PCIe copy rates of pinned
// memory in the same run (the end-to-end ceiling), gbps_cpu the CPU figure
// of the same run, and every bitmap (the warm-up's and the timed rounds')
// is compared with the CPU's (poisoned before the warm-up).
//
// The GPU's end-to-end paths (--gpu-path: pack, gather, copy by default,
// one Result each, gpu_path says which) start where a receiver has the payloads: one per frame of a
// receive ring (--rx-frame bytes a frame, the payload at --rx-offset: 66
// by default, after Ethernet, IPv4 and TCP with timestamps) in host memory
// mapped outside the Go heap and registered with the device once
// (cuMemHostRegister; the payloads are written there before the clock
// starts, as a NIC would). pack: the fillers copy each payload out of the
// ring into page-locked batches, which the copy engine moves (the host copy
// a datapath that packs at receive does as well; --gpu-fillers,
// --gpu-batch-bytes). gather: the fillers write only each batch's index
// (12 bytes a payload) and the GPU reads the payloads out of the ring
// itself (rabin_gather; --gpu-gather-fillers, --gpu-gather-batch-bytes,
// --gpu-gather-warps, --gpu-gather16 for the 16-byte-word variant);
// gbps_gather is that kernel alone over all payloads. copy: the fillers
// write only the index too (the same shape as gather's), and the copy
// engine moves runs of consecutive frames out of the ring with 2-D copies
// into a staging buffer on the device, which rabin_gather lays out as the
// packed layout there (gpu.ViaCopy); gbps_copy is the copy engine's runs
// alone over all payloads, copy_runs the copies a round and copy_extra the
// bytes copied past the payloads (over the payload bytes). Every figure
// includes every byte's way into device memory and the bitmap's way back;
// none includes the NIC's write into the ring.
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

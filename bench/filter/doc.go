// Package filter is "gswitchctl bench filter": gPF's many-filter
// evaluation on a capture, on the CPU (tables/filter's Evaluator.Eval)
// and, with --backend gpu or both, on the GPU (package gpu's filter
// kernel: kernel only, and end to end from the capture file), against
// tcpdump and golang.org/x/net/bpf on the same file.
//
// # What it measures
//
// The packets come from --pcap FILE, or from a synthetic capture of
// --packets frames it writes to a temporary pcap (Ethernet: IPv4 TCP, UDP
// and ICMP between 10.0.0.0/16 hosts, IPv6 UDP, ARP and VLAN-tagged IPv4,
// 60 to 130 bytes, mean about 80). The filters are --filters-file's
// (NAME: EXPRESSION lines), or for each count of --filters (default
// 1,100,1000) a typical monitoring set of that many (Specs: hosts, nets,
// ports, port ranges, TCP flags, VLANs, ICMP or ARP of a host), compiled
// once for the capture's link type.
//
// For each set it times --rounds passes of Eval over every packet (held
// in memory; --threads goroutines, each with its own Evaluator, over a
// share of the packets): mpps is the median pass's rate, mpps_cpu the
// median rate per CPU-second of the process (getrusage), which is what
// the evaluation costs on a machine that other work shares, and
// mpps_file the median of passes that also read the capture from the page
// cache: mapped and scanned on --threads goroutines as gswitchctl filter
// --backend cpu does (gpfscan.ScanCapture without a Filter: the records
// split and evaluated where they lie, answers in file order; the counts
// of a pass over the whole capture must equal the in-memory pass's), and
// mpps_file_cpu the same per CPU-second.
// tcpdump_mpps is "tcpdump -r FILE --count EXPR" for the set's first
// filter, timed the same way (median of the rounds, the file in the page
// cache), tcpdump_mpps_cpu the same per CPU-second of tcpdump's own
// (its rusage): the rate of one filter per pass that tcpdump has, N
// filters needing N passes. On a shared machine compare the per
// CPU-second figures. With --check (the default)
// the first filter's count must equal tcpdump's, or the run fails with
// benchutil.ErrMismatch.
//
// # The GPU
//
// With --backend gpu or both (a build with -tags cuda), each set also
// gets a GPUResult: the kernel alone (KernelTime: CUDA events, the mean of
// 10 launches) over --kernel-packets reduced packets already on the
// device, and --gpu-rounds end-to-end passes over the capture file in the
// page cache (gpfscan.MapCapture, then gpfscan.ScanCapture: --workers goroutines
// parsing into a pool of page-locked batches of --batch packets made
// once, --streams streams, counters back; the median pass); the first
// pass's per-filter packet and byte counts are compared with the CPU's
// (every packet, Eval on every CPU) and any difference fails --check.
// The synthetic capture (WriteSyntheticPcap) is generated on every CPU,
// so that tens of millions of packets take seconds on the device
// machine; the CPU's timed passes use its first --cpu-packets packets.
// x/net/bpf runs the program tcpdump -ddd prints for the set's first
// filter (where tcpdump is installed), one thread.
//
// # JSON
//
// With --json, one Result per filter set per line.
package filter

// Package benchutil is what gswitch's benchmarks (the packages under
// bench/) share:
//
//   - the command line: ErrUsage and ErrMismatch (gswitchctl's exit
//     statuses 2 and 1), CommonFlags (--backend, --check, --check-sample,
//     --json, --lookups, --rounds, --batch, --threads, --seed and the GPU
//     backend's --gpus, --min-batch, --streams, --depth, --chunk) and
//     ParseFlags, which refuses positional arguments;
//   - Result, one run of bench lpm or bench classify (one JSON object per
//     line with --json; its fields' tags are the schema), PrintResults
//     (JSON lines or a readable table), CheckOutcome and Machine;
//   - rounds and statistics: TimeRounds times a function over rounds and
//     returns each round's rate, Parallel runs it on several goroutines,
//     Median, Percentile (nearest rank) and LatencyStats (mean, p99);
//   - Pipe, the GPU backend fed the datapath's way: pinned batches filled
//     once from the traffic and submitted back to back with a bounded
//     number in flight (PipeRounds, NewAddrPipe);
//   - the GPU backend choice: NewGPUEngine is nil in a build without the
//     cuda tag, so --backend gpu is a usage error there; gpu_cuda.go
//     (build tag cuda) sets it to gpu.Open on the named devices, with no
//     fallback to the CPU: a benchmark of the GPU must run on the GPU.
//
// Rates are medians over the timed rounds: one slow round (a timer tick,
// another process) moves the median little, and the rounds' spread is kept
// where the comparison needs it (loss_pct_rounds).
//
// MismatchLog receives the first few wrong answers a --check finds; it is
// a package variable and is written without a lock, so benchmarks run one
// at a time in a process (as gswitchctl does).
package benchutil

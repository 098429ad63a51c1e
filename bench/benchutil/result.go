package benchutil

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"
)

// Result is one benchmark run, printed as one JSON object with --json.
// Rates are medians over the timed rounds.
type Result struct {
	Work    string `json:"work"`    // lpm | classify
	Backend string `json:"backend"` // cpu
	Algo    string `json:"algo"`    // gamt | linear | tuple | bloom
	Data    string `json:"data"`    // the file or synthetic spec, and how traffic/updates were made
	Traffic string `json:"traffic"` // random | table (in-table) | rules (drawn from the rules)
	Family  int    `json:"family,omitempty"`

	Entries             int     `json:"entries"`         // prefixes, or rules in the table after range expansion
	Rules               int     `json:"rules,omitempty"` // rules in the source before expansion
	Classes             int     `json:"classes,omitempty"`
	Lookups             int64   `json:"lookups"` // lookups timed, all rounds
	Rounds              int     `json:"rounds"`
	Threads             int     `json:"threads"`
	Batch               int     `json:"batch"`
	MLPS                float64 `json:"mlps,omitempty"`                   // million lookups/s (lpm); on the gpu backend end to end, copies included
	MLPSKernel          float64 `json:"mlps_kernel,omitempty"`            // gpu backend: the lookup kernel alone (CUDA events)
	MLPSCPU             float64 `json:"mlps_cpu,omitempty"`               // gpu backend: the CPU backend on the same traffic in the same run
	BatchCPU            int     `json:"batch_cpu,omitempty"`              // gpu backend: the batch of the CPU figure
	Streams             int     `json:"streams,omitempty"`                // gpu backend: streams the lookups are pipelined over
	Depth               int     `json:"depth,omitempty"`                  // gpu backend: most pinned batches in flight
	MLPSStaged          float64 `json:"mlps_staged,omitempty"`            // gpu backend: end to end through the slice API (host staging copies included)
	MPPSStaged          float64 `json:"mpps_staged,omitempty"`            // likewise for classify
	BatchLatencyUs      float64 `json:"batch_latency_us,omitempty"`       // gpu backend: mean Submit-to-results time of a pinned batch
	BatchLatencyP99Us   float64 `json:"batch_latency_p99_us,omitempty"`   // its 99th percentile
	MaxDelayUs          float64 `json:"max_delay_us,omitempty"`           // --max-delay: the dynamic batcher's delay bound
	BatcherMLPS         float64 `json:"batcher_mlps,omitempty"`           // keys/s fed through the batcher one by one
	BatcherLatencyUs    float64 `json:"batcher_latency_us,omitempty"`     // mean first-key-to-results time of its batches
	BatcherMaxLatencyUs float64 `json:"batcher_max_latency_us,omitempty"` //
	BatcherByDelay      uint64  `json:"batcher_by_delay,omitempty"`       // batches it closed because of the delay
	MPPS                float64 `json:"mpps,omitempty"`                   // million packets/s (classify); on the gpu backend end to end, copies included
	MPPSKernel          float64 `json:"mpps_kernel,omitempty"`            // gpu backend: the classification kernel alone (CUDA events)
	MPPSCPU             float64 `json:"mpps_cpu,omitempty"`               // gpu backend: the CPU (Table.LookupBatch) on the same packets in the same run
	NsPerLookup         float64 `json:"ns_per_lookup"`
	BuildMS             float64 `json:"build_ms"`
	BytesPerEntry       float64 `json:"bytes_per_entry"`
	ImageBytes          int     `json:"image_bytes"`

	UpdatesPerSec    float64   `json:"updates_per_sec"`              // achieved rate under lookups (0: none asked)
	UpdateMaxPerSec  float64   `json:"update_max_per_sec,omitempty"` // updates/s applied back to back
	MLPSUnderUpdates float64   `json:"mlps_under_updates,omitempty"` // lookups while updates were applied
	MLPSIdle         float64   `json:"mlps_idle,omitempty"`          // the same loop without updates
	LossPct          float64   `json:"loss_pct,omitempty"`           // 100*(idle-under)/idle
	LossPctRounds    []float64 `json:"loss_pct_rounds,omitempty"`    // every paired round's loss (the spread behind the median)
	ApplyOn          string    `json:"apply_on,omitempty"`           // gpu backend: the goroutine that called Backend.Apply (updater or lookup)
	VisibleP50us     float64   `json:"visible_p50_us,omitempty"`     // update applied to table -> visible to lookups
	VisibleP99us     float64   `json:"visible_p99_us,omitempty"`     //
	Bubbles          uint64    `json:"bubbles,omitempty"`            // words shipped as bubbles during the updates
	Rebuilds         uint64    `json:"rebuilds,omitempty"`           // full image reloads during the updates
	Layout           string    `json:"layout,omitempty"`             // strides, projection, ...
	Checked          int       `json:"checked"`                      // lookups compared with the brute-force reference
	Mismatches       int       `json:"mismatches"`                   //
	Machine          string    `json:"machine"`                      // CPU model and cores
	GPU              string    `json:"gpu"`                          // none on the CPU backend
	GoVersion        string    `json:"go"`                           //
	Time             string    `json:"time"`                         // when it ran (UTC)
	Notes            string    `json:"notes,omitempty"`              //
}

// MismatchLog receives the first mismatches a --check finds.
var MismatchLog io.Writer = os.Stderr

// NewResult is a Result of work with the flags' settings and the machine's
// description filled in.
func NewResult(work string, c *CommonFlags) Result {
	return Result{
		Work: work, Backend: c.Backend, Rounds: c.Rounds, Threads: c.Threads, Batch: c.Batch,
		Machine: Machine(), GPU: "none", GoVersion: runtime.Version(),
		Time: time.Now().UTC().Format(time.RFC3339),
	}
}

// PrintResults writes the runs as JSON lines or as a readable table.
func PrintResults(w io.Writer, asJSON bool, rs []Result) error {
	if asJSON {
		enc := json.NewEncoder(w)
		for _, r := range rs {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	}
	for i, r := range rs {
		if i == 0 {
			fmt.Fprintf(w, "# %s, %s, %s, gpu: %s\n", r.Machine, r.GoVersion, r.Time, r.GPU)
		}
		rate, unit := r.MLPS, "Mlookups/s"
		if r.Work == "classify" {
			rate, unit = r.MPPS, "Mpackets/s"
		}
		fmt.Fprintf(w, "%s %s/%s traffic=%s entries=%d%s: %.2f %s (%.1f ns/lookup, median of %d, %d thread(s), batch %d), build %.0f ms, %.1f bytes/entry\n",
			r.Work, r.Backend, r.Algo, r.Traffic, r.Entries, classes(r.Classes), rate, unit, r.NsPerLookup, r.Rounds, r.Threads, r.Batch, r.BuildMS, r.BytesPerEntry)
		if r.Layout != "" {
			fmt.Fprintf(w, "  layout: %s\n", r.Layout)
		}
		if r.Backend == "gpu" {
			k, st, cpu := r.MLPSKernel, r.MLPSStaged, r.MLPSCPU
			if r.Work == "classify" {
				k, st, cpu = r.MPPSKernel, r.MPPSStaged, r.MPPSCPU
			}
			fmt.Fprintf(w, "  gpu: end to end %.1f M/s pinned (%d streams, depth %d, batch latency mean %.1f µs p99 %.1f µs), %.1f M/s through host staging, kernel %.1f M/s; cpu %.1f M/s (x%.0f)\n",
				rate, r.Streams, r.Depth, r.BatchLatencyUs, r.BatchLatencyP99Us, st, k, cpu, rate/max(cpu, 1e-9))
		}
		if r.UpdateMaxPerSec > 0 {
			fmt.Fprintf(w, "  updates back to back: %.0f/s\n", r.UpdateMaxPerSec)
		}
		if r.MLPSUnderUpdates > 0 {
			fmt.Fprintf(w, "  under %.0f updates/s: %.2f Mlookups/s vs %.2f idle in the same loop (loss %.2f%%), visible p50 %.0f µs p99 %.0f µs, %d bubbles, %d reloads\n",
				r.UpdatesPerSec, r.MLPSUnderUpdates, r.MLPSIdle, r.LossPct, r.VisibleP50us, r.VisibleP99us, r.Bubbles, r.Rebuilds)
		}
		if r.Checked > 0 {
			fmt.Fprintf(w, "  checked %d lookups against the brute-force reference: %d mismatches\n", r.Checked, r.Mismatches)
		}
		if r.Notes != "" {
			fmt.Fprintf(w, "  %s\n", r.Notes)
		}
	}
	fmt.Fprintf(w, "# data: %s\n", rs[len(rs)-1].Data)
	return nil
}

func classes(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" classes=%d", n)
}

// CheckOutcome turns mismatches into the command's error.
func CheckOutcome(rs []Result) error {
	n := 0
	for _, r := range rs {
		n += r.Mismatches
	}
	if n > 0 {
		return fmt.Errorf("%w: %d lookups disagree with the brute-force reference", ErrMismatch, n)
	}
	return nil
}

// Machine describes the CPU this runs on.
func Machine() string {
	model := runtime.GOARCH
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%s, %d cores", model, runtime.NumCPU())
}

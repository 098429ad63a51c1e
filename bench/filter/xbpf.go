package filter

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/bpf"

	"github.com/gswitch/gswitch/bench/benchutil"
)

// xbpf times golang.org/x/net/bpf's interpreter running the classic BPF
// program tcpdump -ddd compiles for expr (libpcap's optimized program, as
// tcpdump runs it) over the packets, one thread, and records its count.
// The VM takes a packet's captured bytes as its length (the synthetic
// captures are not truncated).
func xbpf(r *Result, expr, path string, pkts []packet, rounds int) error {
	out, err := exec.Command("tcpdump", "-r", path, "-ddd", expr).Output()
	if err != nil {
		return fmt.Errorf("tcpdump -r %s -ddd %q: %v", path, expr, err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	n, err := strconv.Atoi(strings.TrimSpace(lines[0]))
	if err != nil || n != len(lines)-1 {
		return fmt.Errorf("tcpdump -ddd %q: %q", expr, out)
	}
	raw := make([]bpf.Instruction, 0, n)
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) != 4 {
			return fmt.Errorf("tcpdump -ddd %q: line %q", expr, l)
		}
		var v [4]uint64
		for i := range f {
			if v[i], err = strconv.ParseUint(f[i], 10, 32); err != nil {
				return fmt.Errorf("tcpdump -ddd %q: line %q", expr, l)
			}
		}
		raw = append(raw, bpf.RawInstruction{Op: uint16(v[0]), Jt: uint8(v[1]), Jf: uint8(v[2]), K: uint32(v[3])}.Disassemble())
	}
	vm, err := bpf.NewVM(raw)
	if err != nil {
		return fmt.Errorf("x/net/bpf: %q: %v", expr, err)
	}
	var rates []float64
	for range rounds {
		var count uint64
		t0 := time.Now()
		for _, p := range pkts {
			if k, err := vm.Run(p.data); err == nil && k > 0 {
				count++
			}
		}
		rates = append(rates, float64(len(pkts))/time.Since(t0).Seconds()/1e6)
		r.XBPFCount = count
	}
	r.XBPFMPPS = benchutil.Median(rates)
	return nil
}

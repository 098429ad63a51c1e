package main

import (
	"fmt"
	"io"

	"github.com/gswitch/gswitch/agent/ctl"
)

// printRE writes redundancy elimination's settings and counters.
func printRE(w io.Writer, r ctl.REInfo) {
	if !r.Enabled {
		fmt.Fprintln(w, "redundancy elimination\toff")
		return
	}
	match := r.Match
	if match == "" {
		match = "every TCP segment"
	}
	fmt.Fprintf(w, "port\t%d (%s)\tmatch: %s\tlog %d bytes\n", r.Port, r.Interface, match, r.LogBytes)
	if r.Impaired {
		fmt.Fprintln(w, "impairment\ton (test stage: loss and reordering of what the port sends)")
	}
	e, d := r.Encoder, r.Decoder
	pct := 0.0
	if e.BytesIn > 0 {
		pct = 100 * float64(e.Saved) / float64(e.BytesIn)
	}
	fmt.Fprintf(w, "encoder\tepoch %#x\tframes %d\tbytes in %d\tbytes out %d\tsaved %d (%.1f%%)\n", e.Epoch, e.Frames, e.BytesIn, e.BytesOut, e.Saved, pct)
	fmt.Fprintf(w, "\t\tencoded %d\treferences %d\traw sends %d\tpassed %d\tpeer resets %d\n", e.Encoded, e.Refs, e.Raw, e.Passed, e.Resets)
	if e.Markers != "" && e.Markers != "cpu" {
		fmt.Fprintf(w, "\t\tmarkers of large batches on %s\tbatches %d\tfailures %d (the CPU took them)\n", e.Markers, e.Offloaded, e.OffloadFailures)
	}
	if e.Pipelined > 0 || e.TxDropped > 0 {
		fmt.Fprintf(w, "\t\ton its own goroutine: batches %d\thand-offs that waited %d\tframes the port refused %d\n", e.Pipelined, e.QueueWaits, e.TxDropped)
	}
	if e.Bundles > 0 {
		fmt.Fprintf(w, "\t\tbundles sent %d\tframes in them %d\n", e.Bundles, e.Bundled)
	}
	fmt.Fprintf(w, "decoder\tepoch %#x\tframes %d\tbytes in %d\tbytes out %d\trestored %d\tplain %d\n", d.Epoch, d.Frames, d.BytesIn, d.BytesOut, d.Restored, d.Plain)
	fmt.Fprintf(w, "\t\tdecode failures %d\t(missing %d, bad crc %d, malformed %d)\tlogged %d\tacks %d\tnaks %d\tpeer resets %d\n",
		d.Failures, d.Missing, d.BadCRC, d.Malformed, d.Logged, d.Acks, d.Naks, d.Resets)
	if d.Bundles > 0 {
		fmt.Fprintf(w, "\t\tbundles opened %d\n", d.Bundles)
	}
}

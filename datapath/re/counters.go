package re

// EncoderCounters is a snapshot of an encoder's counters.
type EncoderCounters struct {
	Epoch    uint32 // the encoder's epoch
	Frames   uint64 // frames given to Encode
	BytesIn  uint64 // their bytes
	BytesOut uint64 // the bytes of the frames sent for them (encoded or not)
	Saved    uint64 // BytesIn − BytesOut over the encoded frames
	Encoded  uint64 // frames sent encoded
	Raw      uint64 // eligible frames sent unchanged (no reference, or no gain)
	Refs     uint64 // references in the encoded frames
	Passed   uint64 // frames not eligible (not TCP, payload too short, not matched)
	Resets   uint64 // the peer's decoder restarted (a new epoch in its control frames)
	// Markers says where the markers of large batches are computed ("cpu"
	// or the Config.Markers' name); Offloaded counts the batches it
	// computed, OffloadFailures those it failed (the CPU took them).
	Markers                    string
	Offloaded, OffloadFailures uint64
	// Pipelined: batches encoded on the encoder's own goroutine
	// (Link.RunEncoder); QueueWaits: hand-offs to it that waited for room
	// (back-pressure); TxDropped: frames the port refused on it.
	Pipelined, QueueWaits, TxDropped uint64
	// Bundles: bundle frames sent (Link); Bundled: the frames in them.
	Bundles, Bundled uint64
}

// DecoderCounters is a snapshot of a decoder's counters.
type DecoderCounters struct {
	Epoch     uint32 // the decoder's epoch
	Frames    uint64 // frames received (control frames included; a bundle's frames one by one)
	Bundles   uint64 // bundle frames received
	BytesIn   uint64 // their bytes
	BytesOut  uint64 // the bytes of the plain and restored frames passed on
	Restored  uint64 // encoded frames restored
	Plain     uint64 // frames passed as they came
	Logged    uint64 // payloads entered in the log
	Failures  uint64 // encoded frames dropped: Missing + BadCRC + Malformed
	Missing   uint64 // a referenced payload not in the log
	BadCRC    uint64 // the restored packet's CRC-32C differed
	Malformed uint64 // a bad shim
	Resets    uint64 // the peer's encoder restarted (the log emptied)
	Acks      uint64 // payload ids acknowledged
	Naks      uint64 // payload ids refused
}

// Counters returns a snapshot of the encoder's counters.
func (e *Encoder) Counters() EncoderCounters {
	s := &e.Stats
	c := EncoderCounters{Epoch: e.epoch, Frames: s.Frames.Load(), BytesIn: s.BytesIn.Load(), BytesOut: s.BytesOut.Load(),
		Saved: s.Saved.Load(), Encoded: s.Encoded.Load(), Raw: s.Raw.Load(), Refs: s.Refs.Load(),
		Passed: s.Passed.Load(), Resets: s.Resets.Load(), Markers: "cpu", Offloaded: s.OffloadBatches.Load(),
		OffloadFailures: s.OffloadFailures.Load(), Pipelined: s.Pipelined.Load(), QueueWaits: s.QueueWaits.Load(),
		TxDropped: s.TxDropped.Load(), Bundles: s.Bundles.Load(), Bundled: s.Bundled.Load()}
	if e.markers != nil {
		c.Markers = e.markers.Name()
	}
	return c
}

// Counters returns a snapshot of the decoder's counters.
func (d *Decoder) Counters() DecoderCounters {
	s := &d.Stats
	return DecoderCounters{Epoch: d.epoch, Frames: s.Frames.Load(), BytesIn: s.BytesIn.Load(), BytesOut: s.BytesOut.Load(),
		Restored: s.Restored.Load(), Plain: s.Plain.Load(), Logged: s.Logged.Load(), Failures: s.Failures.Load(),
		Missing: s.Missing.Load(), BadCRC: s.BadCRC.Load(), Malformed: s.Malformed.Load(), Resets: s.Resets.Load(),
		Acks: s.Acks.Load(), Naks: s.Naks.Load(), Bundles: s.Bundles.Load()}
}

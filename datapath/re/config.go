package re

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"sync/atomic"

	"github.com/gswitch/gswitch/tables/rabin"
)

// Config is one side's redundancy elimination settings; both sides of a
// link must use the same Pol, Window and Bits (the encoder's markers are
// only its own business, but the defaults keep the two ends alike).
type Config struct {
	LogBytes   int       // payload log size (default 64 MiB)
	Pol        rabin.Pol // default rabin.DefaultPol
	Window     int       // marker window in bytes (default 32)
	Bits       int       // marker mask bits (default 8: about one marker per 256 bytes)
	MinPayload int       // smaller payloads are neither logged nor encoded (default 64)
	MinMatch   int       // shortest run replaced by a reference (default 48)
	// Match selects the frames whose payloads the encoder logs and encodes
	// (nil: every TCP segment). The decoder logs every TCP payload.
	Match func(frame []byte) bool
	// Markers computes the encoder's markers for batches of at least
	// MinBatch eligible payloads (a GPU: DeviceMarkers); it must compute
	// the markers of Pol, Window and Bits (Config.Marker), and the CPU
	// takes over a batch it fails. nil: the CPU computes every batch.
	Markers Markers
	// MinBatch is the smallest batch given to Markers (default 32).
	MinBatch int
	// Bundle is the largest bundle Link.Send builds, in bytes after the
	// Ethernet header (the WAN port's MTU; at most 65,535): consecutive
	// frames of a send batch with the same addresses that fit together go
	// as one bundle frame (bundle.go). 0: no bundles. A decoder opens
	// bundles whatever its own setting.
	Bundle int
}

// Marker returns the rabin.Marker of the configuration's polynomial,
// window and bits (defaults filled in): what a Markers must compute.
func (c Config) Marker() (*rabin.Marker, error) {
	c, err := c.withDefaults()
	if err != nil {
		return nil, err
	}
	return rabin.NewMarker(c.Pol, c.Window, c.Bits)
}

// withDefaults fills the zero fields.
func (c Config) withDefaults() (Config, error) {
	if c.LogBytes == 0 {
		c.LogBytes = 64 << 20
	}
	if c.Pol == 0 {
		c.Pol = rabin.DefaultPol
	}
	if c.Window == 0 {
		c.Window = 32
	}
	if c.Bits == 0 {
		c.Bits = 8
	}
	if c.MinPayload == 0 {
		c.MinPayload = 64
	}
	if c.MinMatch == 0 {
		c.MinMatch = 48
	}
	if c.MinBatch <= 0 {
		c.MinBatch = 32
	}
	switch {
	case c.LogBytes < 1<<16:
		return c, fmt.Errorf("re: log of %d bytes, want at least 64 KiB", c.LogBytes)
	case c.MinMatch <= refLen || c.MinMatch < c.Window:
		return c, fmt.Errorf("re: minimum match %d bytes, want more than a reference (%d) and at least the window (%d)", c.MinMatch, refLen, c.Window)
	case c.Bundle < 0 || (c.Bundle > 0 && c.Bundle < 68):
		return c, fmt.Errorf("re: bundles of %d bytes, want 0 (none) or at least 68 (the IPv4 minimum MTU)", c.Bundle)
	case c.MinPayload < c.Window:
		return c, fmt.Errorf("re: minimum payload %d bytes, want at least the window (%d)", c.MinPayload, c.Window)
	}
	return c, nil
}

func randomEpoch() uint32 {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	if e := binary.BigEndian.Uint32(b[:]); e != 0 {
		return e
	}
	return 1
}

// EncoderStats are the encoder's counters.
type EncoderStats struct {
	Frames, BytesIn, BytesOut, Saved, Encoded, Raw, Refs, Passed, Resets atomic.Uint64
	// OffloadBatches are the batches whose markers Config.Markers
	// computed; OffloadFailures those it failed (the CPU computed them).
	OffloadBatches, OffloadFailures atomic.Uint64
	// Pipelined counts the batches the encoder's goroutine (Link.RunEncoder)
	// encoded; QueueWaits the Sends that waited for room in its queue;
	// TxDropped the frames the port refused on that goroutine.
	Pipelined, QueueWaits, TxDropped atomic.Uint64
	// Bundles counts the bundle frames Link sent, Bundled the frames in
	// them.
	Bundles, Bundled atomic.Uint64
}

// DecoderStats are the decoder's counters; Bundles counts the bundle
// frames received (the frames in them are counted in Frames).
type DecoderStats struct {
	Frames, Restored, Plain, Logged, BytesIn, BytesOut, Failures, Missing, BadCRC, Malformed, Resets, Acks, Naks, Bundles atomic.Uint64
}

package re

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/rabin"
)

// Markers computes the marker positions of batches of payloads: the seam
// between the encoder and where its fingerprinting runs (the CPU,
// CPUMarkers; a GPU, DeviceMarkers over gpu.Markers). Every implementation
// gives the positions rabin.Marker.Markers gives, bit for bit.
type Markers interface {
	// Name says where the markers are computed ("cpu", "cuda").
	Name() string
	// Markers sets pos[k] to the marker positions of payloads[k] in
	// increasing order (appended to pos[k][:0]; len(pos) == len(payloads)).
	// It is safe for concurrent use.
	Markers(payloads [][]byte, pos [][]int32) error
}

// CPUMarkers computes markers on the calling goroutine.
type CPUMarkers struct{ M *rabin.Marker }

// Name returns "cpu".
func (c CPUMarkers) Name() string { return "cpu" }

// Markers computes each payload's markers with rabin.Marker.Markers.
func (c CPUMarkers) Markers(payloads [][]byte, pos [][]int32) error {
	for k, p := range payloads {
		pos[k] = c.M.Markers(pos[k][:0], p)
	}
	return nil
}

// DeviceMarkers computes markers with a gpu.Markers (the CUDA kernel
// rabin_markers on a GPU): the payloads of a batch are packed into one of
// the device's page-locked batches (the indexed compact buffer), their
// bitmap computed and turned into positions. A batch larger than one
// device batch goes through several. Calls from several goroutines each
// take a device batch of their own from a small pool.
type DeviceMarkers struct {
	mk       gpu.Markers
	bytes    int // a device batch's capacity
	payloads int
	pool     chan *gpu.MarkerBatch // the free device batches
	mu       sync.Mutex
	made     int
	max      int
	failed   atomic.Pointer[error] // the first failure: the device is out of service for good
}

// DeviceBatchBytes and DeviceBatchPayloads are a DeviceMarkers batch's
// capacity: 512 payloads of up to a 9,000-byte jumbo frame's.
const (
	DeviceBatchPayloads = 512
	DeviceBatchBytes    = DeviceBatchPayloads * 9024
)

// NewDeviceMarkers returns Markers over mk, which must compute m's markers
// (m is the encoder's Config.Marker); at most batches device batches are
// allocated (1..16), as calls need them.
func NewDeviceMarkers(mk gpu.Markers, batches int) (*DeviceMarkers, error) {
	if mk == nil || batches < 1 || batches > 16 {
		return nil, fmt.Errorf("re: device markers: %d batches over %v: want 1..16 over a gpu.Markers", batches, mk)
	}
	return &DeviceMarkers{mk: mk, bytes: DeviceBatchBytes, payloads: DeviceBatchPayloads,
		pool: make(chan *gpu.MarkerBatch, batches), max: batches}, nil
}

// Name returns the gpu.Markers' name.
func (d *DeviceMarkers) Name() string { return d.mk.Name() }

// batch takes a free device batch, allocating one while fewer than max
// exist, else waiting for one.
func (d *DeviceMarkers) batch() (*gpu.MarkerBatch, error) {
	select {
	case b := <-d.pool:
		return b, nil
	default:
	}
	d.mu.Lock()
	if d.made < d.max {
		d.made++
		d.mu.Unlock()
		b, err := d.mk.NewBatch(d.bytes, d.payloads)
		if err != nil {
			d.mu.Lock()
			d.made--
			d.mu.Unlock()
			return nil, err
		}
		return b, nil
	}
	d.mu.Unlock()
	return <-d.pool, nil
}

// Markers packs the payloads into device batches and computes their
// markers there.
// After a device error it fails every call (the encoder's CPU computes
// them), as the gpu.Engine does with a failed device.
func (d *DeviceMarkers) Markers(payloads [][]byte, pos [][]int32) error {
	if p := d.failed.Load(); p != nil {
		return *p
	}
	err := d.markers(payloads, pos)
	if err != nil {
		err = fmt.Errorf("re: device markers out of service: %w", err)
		d.failed.CompareAndSwap(nil, &err)
	}
	return err
}

// Err returns the error that took the device markers out of service, nil
// while they work.
func (d *DeviceMarkers) Err() error {
	if p := d.failed.Load(); p != nil {
		return *p
	}
	return nil
}

func (d *DeviceMarkers) markers(payloads [][]byte, pos [][]int32) error {
	b, err := d.batch()
	if err != nil {
		return err
	}
	defer func() { d.pool <- b }()
	for done := 0; done < len(payloads); {
		b.Reset()
		n := 0
		for done+n < len(payloads) && b.Add(payloads[done+n]) {
			n++
		}
		if n == 0 {
			return fmt.Errorf("re: device markers: a payload of %d bytes does not fit a batch of %d", len(payloads[done]), d.bytes)
		}
		if err := d.mk.Submit(b); err != nil {
			return err
		}
		if err := d.mk.Wait(b); err != nil {
			return err
		}
		gpu.MarkerPositions(pos[done:done+n], b) // sets pos[done+k] in place
		done += n
	}
	return nil
}

// Close frees the device batches (after the last call of Markers); it
// does not close the gpu.Markers.
func (d *DeviceMarkers) Close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for ; d.made > 0; d.made-- {
		d.mk.FreeBatch(<-d.pool)
	}
}

var (
	_ Markers = CPUMarkers{}
	_ Markers = (*DeviceMarkers)(nil)
)

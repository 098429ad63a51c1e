//go:build !cuda

package gpu

import "github.com/gswitch/gswitch/tables/pubsub"

// EventDeviceBuilt says whether OpenEventDevice can open a device in this
// build (false: it returns ErrNoCUDA at once).
const EventDeviceBuilt = false

// OpenEventDevice returns ErrNoCUDA: this build has no CUDA backend.
func OpenEventDevice(l *pubsub.Layout) (EventDevice, error) { return nil, ErrNoCUDA }

// StartEventDevice returns a function that returns ErrNoCUDA.
func StartEventDevice() func(l *pubsub.Layout) (EventDevice, error) {
	return func(*pubsub.Layout) (EventDevice, error) { return nil, ErrNoCUDA }
}

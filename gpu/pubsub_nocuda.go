//go:build !cuda

package gpu

import "github.com/gswitch/gswitch/tables/pubsub"

// OpenEventDevice returns ErrNoCUDA: this build has no CUDA backend.
func OpenEventDevice(l *pubsub.Layout) (EventDevice, error) { return nil, ErrNoCUDA }

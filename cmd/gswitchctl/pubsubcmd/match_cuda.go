//go:build cuda

package pubsubcmd

import (
	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/pubsub"
)

// gpuOpener returns gpu.OpenEventDevice: device 0 in a context of its own
// and the CUDA matcher (kernels/pubsub.cu) loaded with the layout. Whether
// there is a usable device is known only when it opens; its error says
// why not.
func gpuOpener() (func(*pubsub.Layout) (gpu.EventDevice, error), error) {
	return gpu.OpenEventDevice, nil
}

//go:build !cuda

package pubsubcmd

import (
	"errors"

	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/pubsub"
)

// errNoGPU is match --backend gpu's answer in a build without CUDA.
var errNoGPU = errors.New("--backend gpu needs a gswitchctl built with -tags cuda and a CUDA device")

// gpuOpener returns errNoGPU: this build has no CUDA matcher.
func gpuOpener() (func(*pubsub.Layout) (gpu.EventDevice, error), error) {
	return nil, errNoGPU
}

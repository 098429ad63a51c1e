package gpu

import (
	"errors"
	"fmt"
	"log/slog"
)

// ErrNoCUDA is returned by OpenCUDA in a build without the cuda tag.
var ErrNoCUDA = errors.New("gpu: this gswitch was built without CUDA (build with -tags cuda)")

// Open returns the Engine for a backend choice: "cpu" (no device), "gpu"
// (the CUDA devices of ordinals, every one of which must open) or "auto"
// (those that open; none is fine: the CPU serves, and one log line says
// why). ordinals nil means device 0.
func Open(backend string, ordinals []int, minBatch int, log *slog.Logger) (*Engine, error) {
	return OpenConfig(backend, ordinals, EngineConfig{MinBatch: minBatch, Logger: log})
}

// OpenConfig is Open with the rest of the Engine's configuration (cfg's
// MinBatch, Logger, Auto and the devices' Resident lookups; its Mode and
// Devices are set from backend).
func OpenConfig(backend string, ordinals []int, cfg EngineConfig) (*Engine, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
		cfg.Logger = log
	}
	if ordinals == nil {
		ordinals = []int{0}
	}
	cfg.Mode = backend
	switch backend {
	case "cpu":
	case "gpu", "auto":
		devs, err := OpenCUDAConfig(ordinals, cfg.Resident)
		if err != nil && backend == "gpu" {
			for _, d := range devs {
				d.Close()
			}
			return nil, err
		}
		if err != nil {
			log.Warn("gpu: no usable GPU; lookups run on the CPU backend", "err", err)
		}
		cfg.Devices = devs
	default:
		return nil, fmt.Errorf("gpu: backend %q: want auto, cpu or gpu", backend)
	}
	return NewEngine(cfg), nil
}

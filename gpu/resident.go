package gpu

import "time"

// ResidentConfig sets a CUDA backend's resident lookups: a kernel that
// stays on the device and takes flow lookups of at most 64 keys from a
// mailbox in page-locked host memory, with no launch and no driver call
// per lookup (docs/gpu.md, "Resident lookups"). The zero value takes the
// environment's settings (GSWITCH_CUDA_RESIDENT, GSWITCH_CUDA_RESIDENT_IDLE_US:
// off unless they say). A build without CUDA ignores it.
type ResidentConfig struct {
	// Slots is the mailbox's slots, 1 to 1024: the flow batches that may
	// hold one (and so go to the resident kernel) at once; a batch made
	// when every slot is held goes through the streams. 0: the
	// environment's (GSWITCH_CUDA_RESIDENT=N, "on" = 64; unset: off).
	Slots int
	// Idle is how long the kernel stays with no lookup before it leaves
	// (all its blocks together; the next lookup launches it again). 0:
	// the environment's (GSWITCH_CUDA_RESIDENT_IDLE_US), else 2 ms.
	Idle time.Duration
}

// MaxResidentSlots is the most slots a ResidentConfig may ask for.
const MaxResidentSlots = 1024

// Package spin waits a short while on the processor without a system call
// and without the Go scheduler: Pause runs the processor's spin-wait hint
// (x86's PAUSE) n times.
//
// A goroutine that polls a word another agent writes (a GPU's completion
// word in mapped memory) can read it in a loop with runtime.Gosched between
// reads; each Gosched goes through the scheduler's global run queue and
// its lock, which eight pollers on eight processors contend for. Pausing
// between reads instead keeps the goroutine on its processor, hands the
// core's execution resources to its other hardware thread while it waits
// (what PAUSE is for), and takes no lock. The caller still yields now and
// then, so that goroutines waiting for a processor get one.
//
// On other architectures Pause is a loop of atomic loads of a private
// word, which the compiler keeps.
package spin

//go:build tools && cuda

package gswitch

// gorgonia.org/cu links libcuda: it is only ever imported under the build tag
// cuda.
import _ "gorgonia.org/cu"

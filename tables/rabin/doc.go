// Package rabin computes Rabin fingerprints over a sliding window of bytes
// and the two things built on them: the markers of a payload (the positions
// redundancy elimination anchors its cache on) and content-defined chunks of
// a stream (whose boundaries equal github.com/restic/chunker v0.4.0's).
//
// # Fingerprints
//
// A polynomial P over GF(2) of degree d (1 <= d <= 63) is a Pol: bit i is the
// coefficient of x^i, so bit d is set. A byte is the polynomial of its bits
// (bit i ↦ x^i). The fingerprint of the window b_0 … b_{w−1} (b_0 first) is
//
//	(Σ_j b_j · x^{8(w−1−j)}) mod P
//
// a polynomial of degree below d, that is a uint64 below 2^d. Marker
// detection asks P to be irreducible (Pol.Irreducible) so that fingerprints
// spread evenly; the default, DefaultPol, is an irreducible polynomial of
// degree 53 (restic's test polynomial), the largest degree restic's chunker
// accepts, so one default serves markers and chunks alike.
//
// # Rolling
//
// Sliding the window by one byte takes two table look-ups (Tables): the
// outgoing byte b_0 is removed by XOR-ing out[b_0] = b_0 · x^{8(w−1)} mod P,
// the fingerprint is multiplied by x^8 and the byte appended, and the 8 bits
// that rose to degree d and above are reduced by XOR-ing mod[top] = top ·
// x^d mod P | top · x^d (the second part cancels those bits, so one XOR
// reduces). A window that starts out as w zero bytes has fingerprint 0, so a
// rolling hash started from zero at position s gives exact fingerprints from
// position s+w−1 on: no state runs across payloads, and independent stretches
// of one buffer can be hashed at once.
//
// # Markers
//
// A position i of a payload (0-based, i >= w−1) is a marker when the
// fingerprint of bytes i−w+1 … i has its low B bits zero (Markers). Each
// payload is fingerprinted on its own.
//
// # Chunks
//
// Chunker cuts a stream where restic/chunker v0.4.0 does, for the same
// polynomial, minimum and maximum size and average bits: a chunk starting at
// s ends after the first byte s+L−1, L >= min, whose 64-byte window's
// fingerprint has its low avg-bits zero, or at L = max, or at the end of the
// stream. restic reaches the same answer by skipping min−64 bytes and then
// rolling its hash byte by byte, so its Cut values are the same
// fingerprints; for the last chunk of a stream, which ends without a cut,
// Cut is restic's rolling state at the end (see Chunker.Next).
//
// The search for a cut is a pure function of the bytes [s+min−64, s+max):
// each candidate's fingerprint depends on its own 64 bytes only. Cutter
// therefore checks the candidates in rounds of 4·laneBlock (16,384): four
// lanes over four consecutive stretches of a round roll side by side, each
// started on the whole window of its first candidate, so that the four
// dependency chains of table look-ups overlap in the processor; the
// earliest lane with a hit decides, and a lane's work past a hit of an
// earlier lane is discarded (at most one round per chunk). A step of each
// lane is
//
//	F' = (F·x^8 + b_in) mod P − b_out·x^{8w} mod P
//
// with the second term looked up in a table of its own (the reduction is
// linear, so the leaving byte's term is reduced in advance), and the
// fingerprints are kept left-aligned (F·x^{64−d} in a uint64), so that the
// 8 bits to reduce are the top byte, a constant shift, and the product by
// x^8 drops them by itself: on each lane's chain one shift, one look-up
// and one XOR per byte; restic has a shift by the degree, a look-up and
// two XORs on its single chain. The rounds use one fixed-size array view
// of the buffer with constant lane offsets, so they have no bounds checks
// and keep every lane's state in registers (cutlanes.go). Chunker reads
// its stream a mebibyte at a time, only as far as the next cut needs, so
// it rarely moves bytes within its buffer. The answers are checked equal
// to restic's in the tests (random, text, zero, short files and odd-sized
// reads) and each round against every window fingerprinted directly.
//
// Markers are found the same way: a payload of 512 bytes or more is split
// into four lanes (Marker.MarkersFP).
//
// The GPU counterpart (kernels/rabin.cu) computes the same markers on
// batches of payloads; every answer is compared with this package's.
package rabin

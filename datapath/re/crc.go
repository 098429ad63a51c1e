package re

import "hash/crc32"

// CRC-32C of a concatenation from the CRCs of its parts, so that each
// payload's bytes are checksummed once per side: the encoder has the
// payload's CRC in its id (payloadID's high half) and the shim's CRC of the
// whole IP packet is that combined with the headers' CRC; the decoder
// checks the restored packet the same way and names the payload with the
// payload's CRC it computed for the check. The arithmetic is zlib's
// crc32_combine, in CRC-32C's reflected polynomial: crc(A‖B) =
// crc(A)·x^{8·|B|} ⊕ crc(B) modulo P, which holds for the finished CRCs
// (initial value and final XOR all ones) as Go computes them.

// crc32cPoly is CRC-32C's polynomial, reflected.
const crc32cPoly = 0x82f63b78

// x2n[k] is x^{2^k} modulo P (reflected).
var x2n = func() (t [32]uint32) {
	p := uint32(1) << 30 // x^1
	for k := range t {
		t[k] = p
		p = mulModP(p, p)
	}
	return t
}()

// mulModP returns a·b modulo P, both reflected (bit 31 is x^0).
func mulModP(a, b uint32) uint32 {
	var p uint32
	for m := uint32(1) << 31; m != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
		}
		if b&1 != 0 {
			b = b>>1 ^ crc32cPoly
		} else {
			b >>= 1
		}
	}
	return p
}

// xPow8n returns x^{8n} modulo P.
func xPow8n(n int) uint32 {
	p := uint32(1) << 31 // x^0
	for k := 3; n != 0; n, k = n>>1, k+1 {
		if n&1 != 0 {
			p = mulModP(x2n[k&31], p)
		}
	}
	return p
}

// crcShift remembers x^{8n} for the last n: frames of one size follow
// each other. One goroutine's at a time (the encoder's or decoder's lock).
type crcShift struct {
	n int
	x uint32
}

// combine returns the CRC-32C of A‖B from crcA, crcB and len(B).
func (c *crcShift) combine(crcA, crcB uint32, lenB int) uint32 {
	if c.n != lenB || c.x == 0 {
		c.n, c.x = lenB, xPow8n(lenB)
	}
	return mulModP(c.x, crcA) ^ crcB
}

// checksum is the CRC-32C of b.
func checksum32c(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

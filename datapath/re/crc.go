package re

import (
	"hash/crc32"
	"math/bits"
)

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

// crcShift multiplies by x^{8n} for the lengths it is asked: for the last
// n with x^{8n} remembered (one bitwise product), and for a length asked
// hotRepeat times in a row (frames of one size follow each other: the
// segment size) with a table of four byte look-ups. One goroutine's at a
// time (the encoder's or decoder's lock).
type crcShift struct {
	n, run int    // the last length asked and how often in a row
	x      uint32 // x^{8n}, 0: none yet
	hotN   int    // the length of the table, when hotOK
	hotOK  bool
	hot    [4][256]uint32
}

// hotRepeat is how many times in a row a length is asked before it gets
// its table (32 bitwise products and 1,024 XORs to build).
const hotRepeat = 8

// combine returns the CRC-32C of A‖B from crcA, crcB and len(B).
func (c *crcShift) combine(crcA, crcB uint32, lenB int) uint32 {
	if c.hotOK && lenB == c.hotN {
		t := &c.hot
		return t[0][byte(crcA)] ^ t[1][byte(crcA>>8)] ^ t[2][byte(crcA>>16)] ^ t[3][crcA>>24] ^ crcB
	}
	if c.x == 0 || c.n != lenB {
		c.n, c.x, c.run = lenB, xPow8n(lenB), 0
	}
	if c.run++; c.run >= hotRepeat {
		c.buildHot()
	}
	return mulModP(c.x, crcA) ^ crcB
}

// buildHot makes the table of c.n: hot[k][v] is x^{8n} times the value
// with byte k equal to v (a product is linear in each operand).
func (c *crcShift) buildHot() {
	c.hotN, c.hotOK = c.n, true
	for k := range c.hot {
		var basis [8]uint32
		for i := range basis {
			basis[i] = mulModP(c.x, 1<<uint(8*k+i))
		}
		c.hot[k][0] = 0
		for v := 1; v < 256; v++ {
			c.hot[k][v] = c.hot[k][v&(v-1)] ^ basis[bits.TrailingZeros(uint(v))]
		}
	}
}

// checksum is the CRC-32C of b.
func checksum32c(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

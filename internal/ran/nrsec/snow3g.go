package nrsec

import (
	"encoding/binary"
	"math/bits"
	"sync"
)

// SNOW 3G as specified by ETSI/SAGE ("Specification of the 3GPP
// Confidentiality and Integrity Algorithms UEA2 & UIA2", document 1 for
// UEA2/UIA2 and document 2 for SNOW 3G); 128-NEA1 is UEA2 and 128-NIA1 is
// UIA2 with FRESH = BEARER‖0^27 (TS 33.401 B.1.2, B.2.2).

// snowTables are SNOW 3G's byte functions as word tables, computed from the
// specification's definitions on first use.
type snowTables struct {
	mulAlpha, divAlpha [256]uint32
	// s1 and s2 split the S-boxes S1 and S2 by input byte, the most
	// significant first: S1(w) = s1[0][w>>24] ^ s1[1][w>>16&0xff] ^ …
	s1, s2 [4][256]uint32
}

var tables = sync.OnceValue(newSnowTables)

func newSnowTables() *snowTables {
	t := new(snowTables)
	for x := range 256 {
		// pow[i] is MULxPOW(x, i, 0xA9).
		var pow [246]byte
		pow[0] = byte(x)
		for i := 1; i < len(pow); i++ {
			pow[i] = mulx(pow[i-1], 0xa9)
		}
		t.mulAlpha[x] = word(pow[23], pow[245], pow[48], pow[239])
		t.divAlpha[x] = word(pow[16], pow[39], pow[6], pow[64])

		sr, sq := aesSBox(byte(x)), dicksonSBox(byte(x))
		// Input byte 0 enters the output bytes r0..r3 as 2·s, 3·s, s, s; each
		// next input byte as the same column rotated down by one byte.
		for j := range 4 {
			t.s1[j][x] = bits.RotateLeft32(column(sr, 0x1b), -8*j)
			t.s2[j][x] = bits.RotateLeft32(column(sq, 0x69), -8*j)
		}
	}
	return t
}

func word(b0, b1, b2, b3 byte) uint32 {
	return uint32(b0)<<24 | uint32(b1)<<16 | uint32(b2)<<8 | uint32(b3)
}

func column(s, c byte) uint32 {
	return word(mulx(s, c), mulx(s, c)^s, s, s)
}

// mulx is MULx(v, c): multiplication by x in the GF(2^8) whose polynomial
// is x^8 + c.
func mulx(v, c byte) byte {
	if v&0x80 != 0 {
		return v<<1 ^ c
	}
	return v << 1
}

// gfMul multiplies in the GF(2^8) whose polynomial is x^8 + c.
func gfMul(a, b, c byte) byte {
	var p byte
	for ; b != 0; b >>= 1 {
		if b&1 != 0 {
			p ^= a
		}
		a = mulx(a, c)
	}
	return p
}

// aesSBox is SR, the S-box of Rijndael: the inverse in GF(2^8) modulo
// x^8+x^4+x^3+x+1 (0 for 0), then the affine map.
func aesSBox(x byte) byte {
	// x^254 = x^2·x^4·…·x^128 is the inverse.
	inv := byte(1)
	for range 7 {
		x = gfMul(x, x, 0x1b)
		inv = gfMul(inv, x, 0x1b)
	}
	return inv ^ bits.RotateLeft8(inv, 1) ^ bits.RotateLeft8(inv, 2) ^
		bits.RotateLeft8(inv, 3) ^ bits.RotateLeft8(inv, 4) ^ 0x63
}

// dicksonSBox is SQ: x + x^9 + x^13 + x^15 + x^33 + x^41 + x^45 + x^47 +
// x^49 + 0x25 in GF(2^8) modulo x^8+x^6+x^5+x^3+1.
func dicksonSBox(x byte) byte {
	sq, p := byte(0x25), byte(1)
	for e := 1; e <= 49; e++ {
		p = gfMul(p, x, 0x69)
		switch e {
		case 1, 9, 13, 15, 33, 41, 45, 47, 49:
			sq ^= p
		}
	}
	return sq
}

// snowKey is a 128-bit key as SNOW 3G's words k0..k3: k3 is the key's
// first four bytes.
type snowKey [4]uint32

func newSnowKey(key []byte) snowKey {
	var k snowKey
	for i := range k {
		k[3-i] = binary.BigEndian.Uint32(key[4*i:])
	}
	return k
}

// snow3g is SNOW 3G's state: the LFSR, s_i being lfsr[(head+i)%16], and the
// FSM's registers.
type snow3g struct {
	t          *snowTables
	lfsr       [16]uint32
	head       uint
	r1, r2, r3 uint32
}

// The LFSR's feedback takes in the FSM's output in initialisation mode only.
const (
	initMode      = ^uint32(0)
	keystreamMode = 0
)

// newSnow3g initialises SNOW 3G with key k and iv (IV0..IV3); it is ready
// for the first keystream word.
func newSnow3g(t *snowTables, k snowKey, iv [4]uint32) snow3g {
	const ones = ^uint32(0)
	g := snow3g{t: t, lfsr: [16]uint32{
		k[0] ^ ones, k[1] ^ ones, k[2] ^ ones, k[3] ^ ones,
		k[0], k[1], k[2], k[3],
		k[0] ^ ones, k[1] ^ ones ^ iv[3], k[2] ^ ones ^ iv[2], k[3] ^ ones,
		k[0] ^ iv[1], k[1], k[2], k[3] ^ iv[0],
	}}
	var discard [32]uint32
	g.clock(discard[:32], initMode)
	// Then the FSM's first output is discarded, the LFSR clocked in
	// keystream mode.
	g.clock(discard[:1], keystreamMode)
	return g
}

// clock clocks SNOW 3G len(z) times, storing the keystream words F ⊕ s0 in
// z, in initMode or keystreamMode.
func (g *snow3g) clock(z []uint32, mode uint32) {
	t, s := g.t, &g.lfsr
	h, r1, r2, r3 := g.head, g.r1, g.r2, g.r3
	for i := range z {
		s0, s2, s5, s11, s15 := s[h%16], s[(h+2)%16], s[(h+5)%16], s[(h+11)%16], s[(h+15)%16]
		f := (s15 + r1) ^ r2
		z[i] = f ^ s0
		r := r2 + (r3 ^ s5)
		r3 = t.s2[0][r2>>24] ^ t.s2[1][r2>>16&0xff] ^ t.s2[2][r2>>8&0xff] ^ t.s2[3][r2&0xff]
		r2 = t.s1[0][r1>>24] ^ t.s1[1][r1>>16&0xff] ^ t.s1[2][r1>>8&0xff] ^ t.s1[3][r1&0xff]
		r1 = r
		// s0's slot becomes s15.
		s[h%16] = s0<<8 ^ t.mulAlpha[s0>>24] ^ s2 ^ s11>>8 ^ t.divAlpha[s11&0xff] ^ f&mode
		h++
	}
	g.head, g.r1, g.r2, g.r3 = h, r1, r2, r3
}

// snowKeyed is what NEA1 and NIA1 keep: the tables and the key.
type snowKeyed struct {
	t   *snowTables
	key snowKey
}

func newSnowKeyed(key []byte) snowKeyed { return snowKeyed{tables(), newSnowKey(key)} }

// nea1 is 128-NEA1: UEA2 with COUNT-C = COUNT.
type nea1 struct{ snowKeyed }

func newNEA1(key []byte) keystream { return nea1{newSnowKeyed(key)} }

func (c nea1) xorKeyStream(count uint32, bearer, direction uint8, dst, src []byte) {
	bd := uint32(bearer)<<27 | uint32(direction)<<26
	g := newSnow3g(c.t, c.key, [4]uint32{bd, count, bd, count})
	var z [64]uint32
	for len(src) > 0 {
		words := z[:min(len(z), (len(src)+3)/4)]
		g.clock(words, keystreamMode)
		for _, w := range words {
			if len(src) < 4 {
				for i := range src {
					dst[i] = src[i] ^ byte(w>>(24-8*i))
				}
				return
			}
			binary.BigEndian.PutUint32(dst, binary.BigEndian.Uint32(src)^w)
			dst, src = dst[4:], src[4:]
		}
	}
}

// nia1 is 128-NIA1: UIA2 with COUNT-I = COUNT and FRESH = BEARER‖0^27.
type nia1 struct{ snowKeyed }

func newNIA1(key []byte) macer { return nia1{newSnowKeyed(key)} }

func (m nia1) macBits(count uint32, bearer, direction uint8, message []byte, bitLen uint64) [4]byte {
	fresh, dir := uint32(bearer)<<27, uint32(direction)
	g := newSnow3g(m.t, m.key, [4]uint32{fresh ^ dir<<15, dir<<31 ^ count, fresh, count})
	var z [5]uint32
	g.clock(z[:], keystreamMode)
	var byP gf64Table
	byP.init(uint64(z[0])<<32 | uint64(z[1]))
	q := uint64(z[2])<<32 | uint64(z[3])

	// EVAL = (…((M0·P ⊕ M1)·P ⊕ M2)·P …)·P over the message's 64-bit
	// blocks, the last padded with zeros; then ⊕ LENGTH, times Q.
	var eval uint64
	full := message[:bitLen/64*8]
	for ; len(full) >= 8; full = full[8:] {
		eval = byP.mul(eval ^ binary.BigEndian.Uint64(full))
	}
	if rest := bitLen % 64; rest != 0 {
		var last [8]byte
		copy(last[:], message[bitLen/64*8:(bitLen+7)/8])
		eval = byP.mul(eval ^ binary.BigEndian.Uint64(last[:])&^(^uint64(0)>>rest))
	}
	eval = gf64Mul(eval^bitLen, q)
	var mac [4]byte
	binary.BigEndian.PutUint32(mac[:], uint32(eval>>32)^z[4])
	return mac
}

// UIA2's field is GF(2^64) modulo x^64 + x^4 + x^3 + x + 1.
const gf64Poly = 0x1b

// mul64x is MUL64x(v, 0x1b): multiplication by x.
func mul64x(v uint64) uint64 { return v<<1 ^ v>>63*gf64Poly }

// gf64Mul multiplies bit by bit, as MUL64(v, p, 0x1b) does, in a time
// that does not depend on p.
func gf64Mul(v, p uint64) uint64 {
	var r uint64
	for range 64 {
		r ^= v & -(p & 1)
		p >>= 1
		v = mul64x(v)
	}
	return r
}

// gf64Table multiplies by one value v: entry [k][n] is v·n·x^(4k), so v
// times any w is the XOR of one entry per nibble of w, with no chain of
// reductions.
type gf64Table [16][16]uint64

func (t *gf64Table) init(v uint64) {
	for k := range t {
		// Entry n is the XOR of v·x^(4k+i) for the bits i of n.
		x0 := v
		x1 := mul64x(x0)
		x2 := mul64x(x1)
		x3 := mul64x(x2)
		v = mul64x(x3)
		t[k] = [16]uint64{
			0, x0, x1, x1 ^ x0, x2, x2 ^ x0, x2 ^ x1, x2 ^ x1 ^ x0,
			x3, x3 ^ x0, x3 ^ x1, x3 ^ x1 ^ x0, x3 ^ x2, x3 ^ x2 ^ x0, x3 ^ x2 ^ x1, x3 ^ x2 ^ x1 ^ x0,
		}
	}
}

func (t *gf64Table) mul(w uint64) uint64 {
	return t[0][w&15] ^ t[1][w>>4&15] ^ t[2][w>>8&15] ^ t[3][w>>12&15] ^
		t[4][w>>16&15] ^ t[5][w>>20&15] ^ t[6][w>>24&15] ^ t[7][w>>28&15] ^
		t[8][w>>32&15] ^ t[9][w>>36&15] ^ t[10][w>>40&15] ^ t[11][w>>44&15] ^
		t[12][w>>48&15] ^ t[13][w>>52&15] ^ t[14][w>>56&15] ^ t[15][w>>60]
}

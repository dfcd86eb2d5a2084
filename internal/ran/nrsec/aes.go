package nrsec

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/subtle"
	"encoding/binary"
	"sync"
)

// counterBlock is COUNT‖BEARER‖DIRECTION‖0…0, the first counter block of
// 128-NEA2 and the first 64 bits of 128-NIA2's message (TS 33.401 B.1.3,
// B.2.3).
func counterBlock(count uint32, bearer, direction uint8) [aes.BlockSize]byte {
	var b [aes.BlockSize]byte
	binary.BigEndian.PutUint32(b[:], count)
	b[4] = bearer<<3 | direction<<2
	return b
}

// nea2 is 128-NEA2: AES-128 in counter mode.
type nea2 struct{ block cipher.Block }

func newNEA2(key []byte) keystream { return nea2{newAES(key)} }

func newAES(key []byte) cipher.Block {
	block, err := aes.NewCipher(key)
	if err != nil {
		panic(err) // the key's length was checked
	}
	return block
}

func (c nea2) xorKeyStream(count uint32, bearer, direction uint8, dst, src []byte) {
	blocks := scratch.Get().(*[2][aes.BlockSize]byte)
	defer scratch.Put(blocks)
	ctr, ks := &blocks[0], &blocks[1]
	*ctr = counterBlock(count, bearer, direction)
	if len(src) > smallCTR {
		// One allocation per message: cipher.NewCTR's copy of the
		// expanded key.
		cipher.NewCTR(c.block, ctr[:]).XORKeyStream(dst, src)
		return
	}
	// That allocation costs more than encrypting a few counter blocks one
	// by one.
	for len(src) > 0 {
		c.block.Encrypt(ks[:], ctr[:])
		n := subtle.XORBytes(dst, src, ks[:])
		dst, src = dst[n:], src[n:]
		ctr[15]++
	}
}

// smallCTR is the longest message that NEA2 ciphers block by block: at most
// 16 blocks, whose counters differ in their last byte only.
const smallCTR = 256

// scratch holds blocks for cipher.Block.Encrypt, whose arguments escape to
// the heap: pooled, they cost no allocation per message.
var scratch = sync.Pool{New: func() any { return new([2][aes.BlockSize]byte) }}

// nia2 is 128-NIA2: AES-CMAC (RFC 4493, NIST SP 800-38B) truncated to 32
// bits, over COUNT‖BEARER‖DIRECTION‖0^26‖message.
type nia2 struct {
	block cipher.Block
	// k1 and k2 are CMAC's subkeys, for a last block that is complete (k1)
	// or padded (k2).
	k1, k2 [aes.BlockSize]byte
}

func newNIA2(key []byte) macer {
	m := &nia2{block: newAES(key)}
	m.block.Encrypt(m.k1[:], m.k1[:])
	m.k1 = double(m.k1)
	m.k2 = double(m.k1)
	return m
}

// double multiplies by x in GF(2^128) with the polynomial x^128+x^7+x^2+x+1.
func double(b [aes.BlockSize]byte) [aes.BlockSize]byte {
	be := binary.BigEndian
	hi, lo := be.Uint64(b[:8]), be.Uint64(b[8:])
	var d [aes.BlockSize]byte
	be.PutUint64(d[:8], hi<<1|lo>>63)
	be.PutUint64(d[8:], lo<<1^hi>>63*0x87)
	return d
}

// xorBlock sets x to x ⊕ b[:16].
func xorBlock(x *[aes.BlockSize]byte, b []byte) {
	le := binary.LittleEndian
	le.PutUint64(x[:8], le.Uint64(x[:8])^le.Uint64(b[:8]))
	le.PutUint64(x[8:], le.Uint64(x[8:])^le.Uint64(b[8:16]))
}

func (m *nia2) macBits(count uint32, bearer, direction uint8, message []byte, bitLen uint64) [4]byte {
	const headerBits = 64
	total := headerBits + bitLen
	message = message[:(bitLen+7)/8]
	blocks := scratch.Get().(*[2][aes.BlockSize]byte)
	defer scratch.Put(blocks)
	chain := &blocks[0]

	// The CBC-MAC chain over every block but the last, which CMAC treats
	// apart. Blocks straddle the message: the header fills half of the first.
	var last [aes.BlockSize]byte
	head := counterBlock(count, bearer, direction)
	if total <= 128 {
		*chain = [aes.BlockSize]byte{}
		copy(last[:], head[:8])
		copy(last[8:], message)
	} else {
		*chain = head
		copy(chain[8:], message)
		m.block.Encrypt(chain[:], chain[:])
		lastStart := 16*((total-1)/128) - 8 // of the last block in message
		for b := message[8:lastStart]; len(b) > 0; b = b[aes.BlockSize:] {
			xorBlock(chain, b)
			m.block.Encrypt(chain[:], chain[:])
		}
		copy(last[:], message[lastStart:])
	}

	// The last block has 1 to 128 bits: a partial one gets the bit 1 after
	// them and zeros (including over any bits past bitLen in its last byte).
	k := &m.k1
	if r := (total-1)%128 + 1; r < 128 {
		last[r/8] = last[r/8]&^(0xff>>(r%8)) | 0x80>>(r%8)
		k = &m.k2
	}
	xorBlock(chain, last[:])
	xorBlock(chain, k[:])
	m.block.Encrypt(chain[:], chain[:])
	return [4]byte(chain[:4])
}

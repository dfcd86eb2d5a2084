// Package nrsec implements the 5G NR user-plane security algorithms that
// PDCP applies in the CU-UP (TS 33.501 Annex D): ciphering 128-NEA0..3 and
// integrity 128-NIA0..3, each under a 128-bit key, with the inputs COUNT,
// BEARER and DIRECTION of TS 33.401 Annex B.
//
// NEA2/NIA2 are AES-128 in CTR mode and AES-CMAC, NEA1/NIA1 SNOW 3G
// (UEA2/UIA2), NEA3/NIA3 ZUC (EEA3/EIA3, from gmsm); NEA0 leaves the data as
// it is and NIA0's MAC is all zeros.
package nrsec

import "fmt"

// Algorithm numbers a ciphering (NEA) or integrity (NIA) algorithm as
// TS 33.501 does: the same number names both.
type Algorithm uint8

// The algorithms of TS 33.501.
const (
	Null   Algorithm = 0
	SNOW3G Algorithm = 1
	AES    Algorithm = 2
	ZUC    Algorithm = 3
)

// families are the algorithms of each number.
var families = [...]struct {
	name      string
	cipher    func(key []byte) keystream
	integrity func(key []byte) macer
}{
	Null:   {"null", newNEA0, newNIA0},
	SNOW3G: {"SNOW 3G", newNEA1, newNIA1},
	AES:    {"AES", newNEA2, newNIA2},
	ZUC:    {"ZUC", newNEA3, newNIA3},
}

// String names the algorithm by its number and family, such as "2 (AES)".
func (a Algorithm) String() string {
	if int(a) < len(families) {
		return fmt.Sprintf("%d (%s)", uint8(a), families[a].name)
	}
	return fmt.Sprintf("%d (unknown)", uint8(a))
}

// KeySize is the length in bytes of every algorithm's key.
const KeySize = 16

// Cipher is NEA<alg> under one key; it is safe for concurrent use.
//
// Only the low 5 bits of bearer and the low bit of direction (0 uplink,
// 1 downlink) are used.
type Cipher interface {
	// XORKeyStream ciphers or deciphers src into dst, which may be the same
	// slice but must not overlap it otherwise. It panics if dst is shorter
	// than src.
	XORKeyStream(count uint32, bearer, direction uint8, dst, src []byte)
}

// Integrity is NIA<alg> under one key; it is safe for concurrent use.
//
// Only the low 5 bits of bearer and the low bit of direction (0 uplink,
// 1 downlink) are used.
type Integrity interface {
	// MAC returns the 32-bit MAC-I (or X-MAC) of message.
	MAC(count uint32, bearer, direction uint8, message []byte) [4]byte
}

// NewCipher returns NEA<alg> under key, which must be KeySize bytes long,
// whatever the algorithm.
func NewCipher(alg Algorithm, key []byte) (Cipher, error) {
	if err := check("ciphering", alg, key); err != nil {
		return nil, err
	}
	return nea{families[alg].cipher(key)}, nil
}

// NewIntegrity returns NIA<alg> under key, which must be KeySize bytes long,
// whatever the algorithm.
func NewIntegrity(alg Algorithm, key []byte) (Integrity, error) {
	if err := check("integrity", alg, key); err != nil {
		return nil, err
	}
	return nia{families[alg].integrity(key)}, nil
}

func check(kind string, alg Algorithm, key []byte) error {
	if int(alg) >= len(families) {
		return fmt.Errorf("nrsec: unknown %s algorithm %d, want 0 to %d", kind, uint8(alg), len(families)-1)
	}
	if len(key) != KeySize {
		return fmt.Errorf("nrsec: %s key for algorithm %v is %d bytes, want %d", kind, alg, len(key), KeySize)
	}
	return nil
}

// keystream is one ciphering algorithm. It gets bearer and direction masked
// to their widths and src and dst of the same length.
type keystream interface {
	xorKeyStream(count uint32, bearer, direction uint8, dst, src []byte)
}

// nea checks and masks the inputs for every ciphering algorithm.
type nea struct{ alg keystream }

func (c nea) XORKeyStream(count uint32, bearer, direction uint8, dst, src []byte) {
	if len(dst) < len(src) {
		panic(fmt.Sprintf("nrsec: output of %d bytes for %d bytes of input", len(dst), len(src)))
	}
	c.alg.xorKeyStream(count, bearer&0x1f, direction&1, dst[:len(src)], src)
}

// macer is one integrity algorithm over the first bitLen bits of message
// (3GPP's test data are bit strings). It gets bearer and direction masked
// to their widths, and message holds at least bitLen bits.
type macer interface {
	macBits(count uint32, bearer, direction uint8, message []byte, bitLen uint64) [4]byte
}

// nia masks the inputs for every integrity algorithm.
type nia struct{ alg macer }

func (m nia) MAC(count uint32, bearer, direction uint8, message []byte) [4]byte {
	return m.macBits(count, bearer, direction, message, uint64(len(message))*8)
}

func (m nia) macBits(count uint32, bearer, direction uint8, message []byte, bitLen uint64) [4]byte {
	return m.alg.macBits(count, bearer&0x1f, direction&1, message, bitLen)
}

// nea0 is the null ciphering algorithm.
type nea0 struct{}

func newNEA0([]byte) keystream { return nea0{} }

func (nea0) xorKeyStream(_ uint32, _, _ uint8, dst, src []byte) { copy(dst, src) }

// nia0 is the null integrity algorithm.
type nia0 struct{}

func newNIA0([]byte) macer { return nia0{} }

func (nia0) macBits(uint32, uint8, uint8, []byte, uint64) [4]byte { return [4]byte{} }

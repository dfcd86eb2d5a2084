package nrsec

import "github.com/emmansun/gmsm/zuc"

// nea3 is 128-NEA3: ZUC's 128-EEA3 (TS 35.221), from gmsm.
type nea3 struct{ key []byte }

func newNEA3(key []byte) keystream { return nea3{key: append([]byte(nil), key...)} }

func (c nea3) xorKeyStream(count uint32, bearer, direction uint8, dst, src []byte) {
	s, err := zuc.NewEEACipher(c.key, count, uint32(bearer), uint32(direction))
	if err != nil {
		panic(err) // gmsm checks only the key's length, which was checked
	}
	s.XORKeyStream(dst, src)
}

// nia3 is 128-NIA3: ZUC's 128-EIA3 (TS 35.221), from gmsm.
type nia3 struct{ key []byte }

func newNIA3(key []byte) macer { return nia3{key: append([]byte(nil), key...)} }

func (m nia3) macBits(count uint32, bearer, direction uint8, message []byte, bitLen uint64) [4]byte {
	h, err := zuc.NewEIAHash(m.key, count, uint32(bearer), uint32(direction))
	if err != nil {
		panic(err) // gmsm checks only the key's length, which was checked
	}
	return [4]byte(h.Finish(message, int(bitLen)))
}

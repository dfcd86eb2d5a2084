package nrsec

import (
	"fmt"
	"testing"
)

func BenchmarkCipher(b *testing.B) {
	for _, alg := range algorithms {
		c := newCipher(b, alg, make([]byte, KeySize))
		benchPDUs(b, fmt.Sprintf("NEA%d", alg), func(i int, buf []byte) {
			c.XORKeyStream(uint32(i), 1, 1, buf, buf)
		})
	}
}

func BenchmarkMAC(b *testing.B) {
	for _, alg := range algorithms {
		m := newIntegrity(b, alg, make([]byte, KeySize))
		benchPDUs(b, fmt.Sprintf("NIA%d", alg), func(i int, buf []byte) {
			m.MAC(uint32(i), 1, 1, buf)
		})
	}
}

// benchPDUs runs name/64 and name/1400, for a small and a full-size PDCP
// SDU; run gets the iteration number and the data.
func benchPDUs(b *testing.B, name string, run func(i int, buf []byte)) {
	for _, n := range []int{64, 1400} {
		b.Run(fmt.Sprintf("%s/%d", name, n), func(b *testing.B) {
			buf := make([]byte, n)
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				run(i, buf)
			}
		})
	}
}

package nrsec

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/emmansun/gmsm/cbcmac"
)

var algorithms = []Algorithm{Null, SNOW3G, AES, ZUC}

// lengths cross the word, block and buffer boundaries of the algorithms.
var lengths = []int{0, 1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 23, 24, 25, 31, 32, 33, 255, 256, 257, 1400, 4099}

func random(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

func newCipher(t testing.TB, alg Algorithm, key []byte) Cipher {
	t.Helper()
	c, err := NewCipher(alg, key)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newIntegrity(t testing.TB, alg Algorithm, key []byte) Integrity {
	t.Helper()
	m, err := NewIntegrity(alg, key)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestCipherInPlaceAndRoundTrip ciphers in place and out of place with
// every algorithm (gmsm before v0.29 gave zeros for ZUC in place).
func TestCipherInPlaceAndRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, alg := range algorithms {
		c := newCipher(t, alg, random(rng, KeySize))
		for _, n := range lengths {
			count, bearer, dir := rng.Uint32(), uint8(rng.IntN(32)), uint8(rng.IntN(2))
			plain := random(rng, n)
			out := make([]byte, n+3) // longer than src: only len(src) bytes are written
			c.XORKeyStream(count, bearer, dir, out, plain)
			if !bytes.Equal(out[n:], make([]byte, 3)) {
				t.Errorf("%v, %d bytes: wrote past len(src)", alg, n)
			}
			out = out[:n]
			if alg != Null && n >= 8 && bytes.Equal(out, plain) {
				t.Errorf("%v, %d bytes: ciphertext is the plaintext", alg, n)
			}
			inPlace := slices.Clone(plain)
			c.XORKeyStream(count, bearer, dir, inPlace, inPlace)
			if !bytes.Equal(inPlace, out) {
				t.Errorf("%v, %d bytes: in place\n%x\nout of place\n%x", alg, n, inPlace, out)
			}
			c.XORKeyStream(count, bearer, dir, inPlace, inPlace)
			if !bytes.Equal(inPlace, plain) {
				t.Errorf("%v, %d bytes: deciphering does not give the plaintext back", alg, n)
			}
		}
	}
}

func TestCipherShortOutputPanics(t *testing.T) {
	for _, alg := range algorithms {
		c := newCipher(t, alg, make([]byte, KeySize))
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%v: no panic for 3 bytes of output for 4 of input", alg)
				}
			}()
			c.XORKeyStream(0, 0, 0, make([]byte, 3), make([]byte, 4))
		}()
	}
}

// TestInputsMatter checks that COUNT, BEARER, DIRECTION and the key each
// change the keystream and the MAC, and that only the low 5 bits of bearer
// and the low bit of direction are used.
func TestInputsMatter(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	key, otherKey, msg := random(rng, KeySize), random(rng, KeySize), random(rng, 100)
	type inputs struct {
		key               []byte
		count             uint32
		bearer, direction uint8
	}
	base := inputs{key: key, count: 0x12345678, bearer: 7, direction: 1}
	changed := []inputs{
		{key: otherKey, count: base.count, bearer: base.bearer, direction: base.direction},
		{key: key, count: base.count + 1, bearer: base.bearer, direction: base.direction},
		{key: key, count: base.count ^ 0x80000000, bearer: base.bearer, direction: base.direction},
		{key: key, count: base.count, bearer: base.bearer ^ 0x10, direction: base.direction},
		{key: key, count: base.count, bearer: base.bearer ^ 1, direction: base.direction},
		{key: key, count: base.count, bearer: base.bearer, direction: 0},
	}
	same := []inputs{
		{key: key, count: base.count, bearer: base.bearer | 0xe0, direction: base.direction},
		{key: key, count: base.count, bearer: base.bearer, direction: base.direction | 0xfe},
	}
	for _, alg := range algorithms[1:] {
		run := func(in inputs) ([]byte, [4]byte) {
			out := make([]byte, len(msg))
			newCipher(t, alg, in.key).XORKeyStream(in.count, in.bearer, in.direction, out, msg)
			return out, newIntegrity(t, alg, in.key).MAC(in.count, in.bearer, in.direction, msg)
		}
		wantCipher, wantMAC := run(base)
		for _, in := range changed {
			if c, m := run(in); bytes.Equal(c, wantCipher) || m == wantMAC {
				t.Errorf("%v: %+v gives the ciphertext or MAC of %+v", alg, in, base)
			}
		}
		for _, in := range same {
			if c, m := run(in); !bytes.Equal(c, wantCipher) || m != wantMAC {
				t.Errorf("%v: %+v does not give the ciphertext and MAC of %+v", alg, in, base)
			}
		}
	}
}

// TestKeyIsCopied changes the caller's key slice after construction.
func TestKeyIsCopied(t *testing.T) {
	msg := []byte("a PDCP SDU")
	for _, alg := range algorithms[1:] {
		key := make([]byte, KeySize)
		c, m := newCipher(t, alg, key), newIntegrity(t, alg, key)
		want, wantMAC := make([]byte, len(msg)), m.MAC(1, 2, 0, msg)
		c.XORKeyStream(1, 2, 0, want, msg)
		key[0] = 1
		got := make([]byte, len(msg))
		c.XORKeyStream(1, 2, 0, got, msg)
		if !bytes.Equal(got, want) || m.MAC(1, 2, 0, msg) != wantMAC {
			t.Errorf("%v: changing the key slice changes the algorithm", alg)
		}
	}
}

func TestNullIntegrityIsZero(t *testing.T) {
	m := newIntegrity(t, Null, make([]byte, KeySize))
	if got := m.MAC(1, 2, 1, []byte("message")); got != [4]byte{} {
		t.Errorf("NIA0 MAC %x, want zeros", got)
	}
}

// TestNEA2AgainstCTR checks both ways NEA2 ciphers, block by block and
// with crypto/cipher's CTR, against the latter.
func TestNEA2AgainstCTR(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	key := random(rng, KeySize)
	block, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	c := newCipher(t, AES, key)
	for n := range smallCTR + 40 {
		count, bearer, dir := rng.Uint32(), uint8(rng.IntN(32)), uint8(rng.IntN(2))
		plain := random(rng, n)
		iv := counterBlock(count, bearer, dir)
		want := make([]byte, n)
		cipher.NewCTR(block, iv[:]).XORKeyStream(want, plain)
		got := make([]byte, n)
		c.XORKeyStream(count, bearer, dir, got, plain)
		if !bytes.Equal(got, want) {
			t.Errorf("%d bytes:\n got %x\nwant %x", n, got, want)
		}
	}
}

// TestNIA2AgainstGmsmCMAC checks the CMAC against gmsm's, over lengths that
// end the message on, before and after block boundaries.
func TestNIA2AgainstGmsmCMAC(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	key := random(rng, KeySize)
	block, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	m := newIntegrity(t, AES, key)
	for n := range 100 {
		count, bearer, dir := rng.Uint32(), uint8(rng.IntN(32)), uint8(rng.IntN(2))
		msg := random(rng, n)
		head := counterBlock(count, bearer, dir)
		want := cbcmac.NewCMAC(block, 4).MAC(slices.Concat(head[:8], msg))
		if got := m.MAC(count, bearer, dir, msg); !bytes.Equal(got[:], want) {
			t.Errorf("%d bytes: MAC %x, gmsm's CMAC %x", n, got, want)
		}
	}
}

func TestGF64TableMatchesBitwise(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for range 1000 {
		v, w := rng.Uint64(), rng.Uint64()
		var table gf64Table
		table.init(v)
		if got, want := table.mul(w), gf64Mul(v, w); got != want {
			t.Fatalf("%#x·%#x: table %#x, bitwise %#x", v, w, got, want)
		}
		if gf64Mul(v, w) != gf64Mul(w, v) {
			t.Fatalf("%#x·%#x is not commutative", v, w)
		}
	}
}

// TestConcurrentUse shares one Cipher and one Integrity per algorithm among
// goroutines; each must get what a lone caller gets.
func TestConcurrentUse(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	const packets = 64
	msgs := make([][]byte, packets)
	for i := range msgs {
		msgs[i] = random(rng, 1+rng.IntN(1500))
	}
	for _, alg := range algorithms {
		key := random(rng, KeySize)
		c, m := newCipher(t, alg, key), newIntegrity(t, alg, key)
		wantCipher, wantMAC := make([][]byte, packets), make([][4]byte, packets)
		for i, msg := range msgs {
			wantCipher[i] = make([]byte, len(msg))
			c.XORKeyStream(uint32(i), uint8(i), uint8(i), wantCipher[i], msg)
			wantMAC[i] = m.MAC(uint32(i), uint8(i), uint8(i), msg)
		}
		var wg sync.WaitGroup
		errs := make(chan string, 8*packets)
		for g := range 8 {
			wg.Go(func() {
				for j := range packets {
					i := (j + g*packets/8) % packets // each goroutine starts elsewhere
					out := make([]byte, len(msgs[i]))
					c.XORKeyStream(uint32(i), uint8(i), uint8(i), out, msgs[i])
					if !bytes.Equal(out, wantCipher[i]) {
						errs <- fmt.Sprintf("ciphertext of packet %d", i)
					}
					if m.MAC(uint32(i), uint8(i), uint8(i), msgs[i]) != wantMAC[i] {
						errs <- fmt.Sprintf("MAC of packet %d", i)
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Errorf("%v: concurrent %s differs", alg, e)
		}
	}
}

func TestBadAlgorithmOrKey(t *testing.T) {
	for _, tc := range []struct {
		alg  Algorithm
		key  int
		want string
	}{
		{alg: 4, key: KeySize, want: "unknown"},
		{alg: 255, key: KeySize, want: "unknown"},
		{alg: Null, key: 0, want: "0 bytes"},
		{alg: SNOW3G, key: 15, want: "15 bytes"},
		{alg: AES, key: 17, want: "17 bytes"},
		{alg: ZUC, key: 32, want: "32 bytes"},
		{alg: AES, key: 24, want: "24 bytes"}, // an AES-192 key is not NEA2's
	} {
		key := make([]byte, tc.key)
		c, err := NewCipher(tc.alg, key)
		if err == nil || c != nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewCipher(%v, %d bytes) = %v, %v; want nil and an error saying %q", tc.alg, tc.key, c, err, tc.want)
		}
		m, err := NewIntegrity(tc.alg, key)
		if err == nil || m != nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewIntegrity(%v, %d bytes) = %v, %v; want nil and an error saying %q", tc.alg, tc.key, m, err, tc.want)
		}
	}
}

func TestAlgorithmString(t *testing.T) {
	for alg, want := range map[Algorithm]string{Null: "0 (null)", SNOW3G: "1 (SNOW 3G)", AES: "2 (AES)", ZUC: "3 (ZUC)", 9: "9 (unknown)"} {
		if got := alg.String(); got != want {
			t.Errorf("%d: %q, want %q", uint8(alg), got, want)
		}
	}
}

package nrsec

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/emmansun/gmsm/zuc"
)

// vectorFile is a copy of the project's shared 3GPP test data
// (shared/test-vectors/3gpp-nr-security.json).
const vectorFile = "testdata/3gpp-nr-security.json"

// vector is an entry of any set; each set uses some of the fields.
type vector struct {
	Name      string
	Source    string
	Count     uint32
	CountI    uint32 `json:"count_i"`
	Bearer    uint8
	Direction uint8
	Length    uint64 // bits
	// Ciphering.
	Key        hexBytes `json:"key_cstr"`
	Plaintext  hexBytes `json:"plaintext_cstr"`
	Ciphertext hexBytes `json:"ciphertext_cstr"`
	// Integrity.
	IK      hexBytes `json:"ik_cstr"`
	Message hexBytes `json:"message_cstr"`
	MAC     hexBytes `json:"mact_cstr"`
	// ZUC keystream.
	IV hexBytes `json:"iv_cstr"`
	Z1 hexBytes
	Z2 hexBytes
}

type hexBytes []byte

func (h *hexBytes) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	var err error
	*h, err = hex.DecodeString(s)
	return err
}

func loadVectors(t *testing.T) map[string][]vector {
	t.Helper()
	raw, err := os.ReadFile(vectorFile)
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		About string
		Sets  map[string][]vector
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields() // a field this test does not read would go unchecked
	if err := dec.Decode(&file); err != nil {
		t.Fatalf("%s: %v", vectorFile, err)
	}
	if len(file.Sets) == 0 {
		t.Fatalf("%s has no sets", vectorFile)
	}
	return file.Sets
}

// TestVectors checks every entry of every set of the 3GPP test data; a set
// it does not know fails.
func TestVectors(t *testing.T) {
	checks := map[string]func(*testing.T, vector){
		"nea1":          checkCipher(SNOW3G),
		"nea2":          checkCipher(AES),
		"nea3":          checkCipher(ZUC),
		"nia1":          checkMAC(SNOW3G),
		"nia2":          checkMAC(AES),
		"nia3":          checkMAC(ZUC),
		"zuc_keystream": checkZUCKeystream,
	}
	for name, set := range loadVectors(t) {
		t.Run(name, func(t *testing.T) {
			check, ok := checks[name]
			if !ok {
				t.Fatalf("no check for set %q", name)
			}
			if len(set) == 0 {
				t.Fatal("empty set")
			}
			for _, v := range set {
				t.Run(v.Name, func(t *testing.T) { check(t, v) })
			}
			t.Logf("%d vectors", len(set))
		})
	}
}

func checkCipher(alg Algorithm) func(*testing.T, vector) {
	return func(t *testing.T, v vector) {
		checkBits(t, v.Length, v.Plaintext, v.Ciphertext)
		if len(v.Plaintext) != len(v.Ciphertext) {
			t.Fatalf("%d bytes of plaintext, %d of ciphertext", len(v.Plaintext), len(v.Ciphertext))
		}
		c := newCipher(t, alg, v.Key)
		// The data are whole bytes: only the first Length bits are the
		// test's.
		got := make([]byte, len(v.Plaintext))
		c.XORKeyStream(v.Count, v.Bearer, v.Direction, got, v.Plaintext)
		if !equalBits(got, v.Ciphertext, v.Length) {
			t.Errorf("ciphertext\n got %x\nwant %x (first %d bits)", got, v.Ciphertext, v.Length)
		}
		c.XORKeyStream(v.Count, v.Bearer, v.Direction, got, v.Ciphertext)
		if !equalBits(got, v.Plaintext, v.Length) {
			t.Errorf("deciphered\n got %x\nwant %x (first %d bits)", got, v.Plaintext, v.Length)
		}
	}
}

func checkMAC(alg Algorithm) func(*testing.T, vector) {
	return func(t *testing.T, v vector) {
		checkBits(t, v.Length, v.Message)
		in := newIntegrity(t, alg, v.IK)
		m := in.(nia) // for bit lengths
		if got := m.macBits(v.CountI, v.Bearer, v.Direction, v.Message, v.Length); !bytes.Equal(got[:], v.MAC) {
			t.Errorf("MAC of %d bits %x, want %x", v.Length, got, v.MAC)
		}
		if v.Length == uint64(len(v.Message))*8 {
			if got := in.MAC(v.CountI, v.Bearer, v.Direction, v.Message); !bytes.Equal(got[:], v.MAC) {
				t.Errorf("MAC %x, want %x", got, v.MAC)
			}
		}
		// Bits past Length are not the message's.
		padded := append(slices.Clone(v.Message), 0xff)
		if r := v.Length % 8; r != 0 {
			padded[v.Length/8] ^= 0xff >> r
		}
		if got := m.macBits(v.CountI, v.Bearer, v.Direction, padded, v.Length); !bytes.Equal(got[:], v.MAC) {
			t.Errorf("with other bits past the message: MAC %x, want %x", got, v.MAC)
		}
	}
}

// checkZUCKeystream checks gmsm's ZUC core, under NEA3 and NIA3, against
// TS 35.222's keystream.
func checkZUCKeystream(t *testing.T, v vector) {
	s, err := zuc.NewCipher(v.Key, v.IV)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 8)
	s.XORKeyStream(got, got)
	if want := slices.Concat(v.Z1, v.Z2); !bytes.Equal(got, want) {
		t.Errorf("keystream %x, want %x", got, want)
	}
}

// checkBits fails unless each of data holds length bits.
func checkBits(t *testing.T, length uint64, data ...[]byte) {
	t.Helper()
	for _, d := range data {
		if uint64(len(d))*8 < length {
			t.Fatalf("%d bytes of data for %d bits", len(d), length)
		}
	}
}

func equalBits(a, b []byte, n uint64) bool {
	whole := n / 8
	if !bytes.Equal(a[:whole], b[:whole]) {
		return false
	}
	mask := ^byte(0xff >> (n % 8))
	return n%8 == 0 || (a[whole]^b[whole])&mask == 0
}

package pdcp

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

// The headers are written bit by bit from 38.323 figure 6.2.2.2-1 (12-bit
// SN: D/C, R, R, R, then the SN's 4 high bits; its 8 low bits) and figure
// 6.2.2.3-1 (18-bit SN: D/C, five R, the SN's 2 high bits; 16 more).
func TestDataPDULayout(t *testing.T) {
	sdu := []byte{0x45, 0x00, 0x00, 0x14}
	for _, tc := range []struct {
		name   string
		snSize int
		count  uint64
		want   []byte
	}{
		{name: "12-bit SN 0", snSize: 12, count: 0, want: []byte{0b1000_0000, 0x00}},
		{name: "12-bit SN 0xabc of COUNT 0x12abc", snSize: 12, count: 0x12abc, want: []byte{0b1000_1010, 0xbc}},
		{name: "12-bit SN 4095", snSize: 12, count: 4095, want: []byte{0b1000_1111, 0xff}},
		{name: "18-bit SN 0", snSize: 18, count: 0, want: []byte{0b1000_0000, 0x00, 0x00}},
		{name: "18-bit SN 0x2abcd of COUNT 0x7eabcd", snSize: 18, count: 0x7eabcd, want: []byte{0b1000_0010, 0xab, 0xcd}},
		{name: "18-bit SN 2^18-1", snSize: 18, count: 1<<18 - 1, want: []byte{0b1000_0011, 0xff, 0xff}},
	} {
		tx, err := NewTransmitter(Config{SNSize: tc.snSize, DRB: 1, Direction: Downlink})
		if err != nil {
			t.Fatal(err)
		}
		tx.txNext = tc.count
		buf := append(make([]byte, 8), sdu...)
		out, start, count, err := tx.Protect(buf, 8)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		want := append(bytes.Clone(tc.want), sdu...)
		if got := out[start:]; !bytes.Equal(got, want) || uint64(count) != tc.count {
			t.Errorf("%s: PDU %x COUNT %#x, want %x COUNT %#x", tc.name, got, count, want, tc.count)
		}
		if tx.Next() != uint32(tc.count+1) {
			t.Errorf("%s: TX_NEXT %#x after COUNT %#x", tc.name, tx.Next(), tc.count)
		}
	}
}

// With integrity protection the MAC-I of header and SDU follows the SDU,
// and ciphering covers SDU and MAC-I but leaves the header as it is (38.323
// 5.8, 5.9, 6.2.2.2).
func TestProtectOrder(t *testing.T) {
	cfg := Config{SNSize: 12, DRB: 3, Direction: Downlink, Cipher: shaCipher{7}, Integrity: shaMAC{8}}
	tx, err := NewTransmitter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tx.txNext = 0x5007
	sdu := []byte("an IP packet")
	buf := make([]byte, 2+len(sdu), 2+len(sdu)+MACLen)
	copy(buf[2:], sdu)
	out, start, count, err := tx.Protect(buf, 2)
	if err != nil {
		t.Fatal(err)
	}
	header := []byte{0x80, 0x07}
	mac := shaMAC{8}.MAC(0x5007, 2, 1, append(bytes.Clone(header), sdu...))
	plain := append(bytes.Clone(sdu), mac[:]...)
	want := make([]byte, len(plain))
	shaCipher{7}.XORKeyStream(0x5007, 2, 1, want, plain)
	want = append(header, want...)
	if !bytes.Equal(out[start:], want) || start != 0 || count != 0x5007 {
		t.Errorf("PDU %x at %d, want %x at 0", out[start:], start, want)
	}
	if &out[0] != &buf[0] {
		t.Error("the PDU was not built in the caller's buffer")
	}
	if s := tx.Stats(); s.PDUs != 1 || s.Bytes != uint64(len(want)) {
		t.Errorf("stats %+v", s)
	}
}

// An SDU's SDAP header is integrity protected and left in clear, and so
// is an SDAP control PDU; a receiver of the same configuration reads both.
func TestSDAPHeaderInClear(t *testing.T) {
	cfg := Config{SNSize: 18, DRB: 2, Direction: Downlink, Cipher: shaCipher{7}, Integrity: shaMAC{8}, SDAPHeader: true}
	tx, err := NewTransmitter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var delivered [][]byte
	rx, err := NewReceiver(RxConfig{Config: cfg, Deliver: func(_ uint32, sdu []byte) { delivered = append(delivered, bytes.Clone(sdu)) }})
	if err != nil {
		t.Fatal(err)
	}
	for _, sdu := range [][]byte{[]byte("\xc9an IP packet"), {0x09}} {
		buf := make([]byte, 3+len(sdu), 3+len(sdu)+MACLen)
		copy(buf[3:], sdu)
		out, start, count, err := tx.Protect(buf, 3)
		if err != nil {
			t.Fatal(err)
		}
		mac := shaMAC{8}.MAC(count, 1, 1, append([]byte{0x80, 0, byte(count)}, sdu...))
		plain := append(bytes.Clone(sdu[1:]), mac[:]...)
		want := make([]byte, len(plain))
		shaCipher{7}.XORKeyStream(count, 1, 1, want, plain)
		want = append([]byte{0x80, 0, byte(count), sdu[0]}, want...)
		if !bytes.Equal(out[start:], want) {
			t.Errorf("PDU %x, want %x", out[start:], want)
		}
		if err := rx.Receive(out[start:], time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	if len(delivered) != 2 || string(delivered[0]) != "\xc9an IP packet" || !bytes.Equal(delivered[1], []byte{0x09}) {
		t.Errorf("delivered %q", delivered)
	}
}

func TestProtectErrors(t *testing.T) {
	tx, err := NewTransmitter(secured(18))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		buf  []byte
		off  int
		want string
	}{
		{name: "no headroom", buf: make([]byte, 10, 20), off: 2, want: "header"},
		{name: "offset beyond the buffer", buf: make([]byte, 10, 20), off: 11, want: "header"},
		{name: "no tailroom", buf: make([]byte, 10), off: 3, want: "MAC-I"},
		{name: "SDU too large", buf: make([]byte, 3+MaxSDUSize+1, 3+MaxSDUSize+5), off: 3, want: "maximum"},
	} {
		before := bytes.Clone(tc.buf)
		if _, _, _, err := tx.Protect(tc.buf, tc.off); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one about %q", tc.name, err, tc.want)
		}
		if !bytes.Equal(tc.buf, before) || tx.Next() != 0 {
			t.Errorf("%s: buffer or TX_NEXT changed", tc.name)
		}
	}

	tx.txNext = maxCount
	buf := make([]byte, 3, 10)
	if _, _, count, err := tx.Protect(buf, 3); err != nil || count != maxCount {
		t.Fatalf("last COUNT: %d, %v", count, err)
	}
	if _, _, _, err := tx.Protect(buf[:3], 3); !errors.Is(err, ErrCountExhausted) {
		t.Errorf("after the last COUNT: %v, want ErrCountExhausted", err)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{name: "SN size", cfg: Config{SNSize: 7, DRB: 1}, want: "SN size 7"},
		{name: "DRB 0", cfg: Config{SNSize: 12}, want: "DRB ID 0"},
		{name: "DRB 33", cfg: Config{SNSize: 12, DRB: 33}, want: "DRB ID 33"},
		{name: "direction", cfg: Config{SNSize: 12, DRB: 1, Direction: 2}, want: "direction 2"},
	} {
		if _, err := NewTransmitter(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one about %q", tc.name, err, tc.want)
		}
	}
	deliver := func(uint32, []byte) {}
	for _, tc := range []struct {
		name string
		cfg  RxConfig
		want string
	}{
		{name: "no Deliver", cfg: RxConfig{Config: secured(12)}, want: "Deliver"},
		{name: "negative t-Reordering", cfg: RxConfig{Config: secured(12), TReordering: -1, Deliver: deliver}, want: "t-Reordering"},
		{name: "negative MaxBuffered", cfg: RxConfig{Config: secured(12), MaxBuffered: -1, Deliver: deliver}, want: "MaxBuffered"},
		{name: "bad Config", cfg: RxConfig{Config: Config{SNSize: 12}, Deliver: deliver}, want: "DRB ID 0"},
	} {
		if _, err := NewReceiver(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one about %q", tc.name, err, tc.want)
		}
	}
}

// BenchmarkProtect measures the entity without security: the test doubles'
// SHA-256 would hide what it costs.
func BenchmarkProtect(b *testing.B) {
	tx, err := NewTransmitter(Config{SNSize: 18, DRB: 1, Direction: Downlink})
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 1400)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, _, err := tx.Protect(buf, 64); err != nil {
			b.Fatal(err)
		}
	}
}

package sdap

import (
	"bytes"
	"strings"
	"testing"
)

// session: DRB 1 is the default DRB with both headers and flows 1 and 9
// (9 reflectively mapped); DRB 2 carries flow 5 alone and has no headers.
func session(tb testing.TB) *Session {
	tb.Helper()
	s, err := NewSession(Config{
		DRBs: []DRB{
			{ID: 1, HeaderDL: true, HeaderUL: true, Flows: []Flow{{QFI: 1}, {QFI: 9, RDI: true}}},
			{ID: 2, Flows: []Flow{{QFI: 5}}},
		},
		DefaultDRB: 1,
	})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// The octets are built from the field layout of 37.324 figures 6.2.2.2-1
// (RDI, RQI, QFI) and 6.2.2.3-1 (D/C, R, QFI), most significant bit first.
func TestHeaderOctets(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  byte
		want byte
	}{
		{name: "DL QFI 9", got: DLHeader{QFI: 9}.Octet(), want: 0b00_001001},
		{name: "DL RDI", got: DLHeader{RDI: true, QFI: 63}.Octet(), want: 0b10_111111},
		{name: "DL RQI", got: DLHeader{RQI: true, QFI: 1}.Octet(), want: 0b01_000001},
		{name: "DL both", got: DLHeader{RDI: true, RQI: true, QFI: 0}.Octet(), want: 0b11_000000},
		{name: "UL data", got: ulDataHeader(9), want: 0b10_001001},
		{name: "UL end marker", got: endMarker(9), want: 0b00_001001},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %08b, want %08b", tc.name, tc.got, tc.want)
		}
	}
	if h := parseDLHeader(0b10_101010); h != (DLHeader{RDI: true, QFI: 42}) {
		t.Errorf("parseDLHeader = %+v", h)
	}
}

func TestDownlink(t *testing.T) {
	s := session(t)
	sdu := []byte{0x45, 0, 0, 20}
	for _, tc := range []struct {
		name      string
		qfi       uint8
		rqi       bool
		wantDRB   uint8
		wantStart int
		wantHdr   byte // the octet before the SDU, when a header is written
	}{
		{name: "mapped, DL header", qfi: 1, rqi: false, wantDRB: 1, wantStart: 1, wantHdr: 0b00_000001},
		{name: "RQI from N3", qfi: 1, rqi: true, wantDRB: 1, wantStart: 1, wantHdr: 0b01_000001},
		{name: "RDI configured", qfi: 9, rqi: false, wantDRB: 1, wantStart: 1, wantHdr: 0b10_001001},
		{name: "both", qfi: 9, rqi: true, wantDRB: 1, wantStart: 1, wantHdr: 0b11_001001},
		{name: "no DL header: SDU unchanged", qfi: 5, rqi: true, wantDRB: 2, wantStart: 2, wantHdr: 0},
		{name: "unmapped flow to the default DRB", qfi: 33, rqi: false, wantDRB: 1, wantStart: 1, wantHdr: 0b00_100001},
	} {
		buf := append([]byte{0, 0}, sdu...)
		drb, start, err := s.Downlink(buf, 2, tc.qfi, tc.rqi)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if drb != tc.wantDRB || start != tc.wantStart {
			t.Errorf("%s: DRB %d start %d, want DRB %d start %d", tc.name, drb, start, tc.wantDRB, tc.wantStart)
		}
		if start == 1 && buf[1] != tc.wantHdr {
			t.Errorf("%s: header %08b, want %08b", tc.name, buf[1], tc.wantHdr)
		}
		if !bytes.Equal(buf[2:], sdu) || buf[0] != 0 {
			t.Errorf("%s: buffer %x: only the header octet may change", tc.name, buf)
		}
	}
}

func TestDownlinkErrors(t *testing.T) {
	s := session(t)
	noDefault, err := NewSession(Config{DRBs: []DRB{{ID: 3, HeaderUL: true, Flows: []Flow{{QFI: 2}}}}})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 10)
	for _, tc := range []struct {
		name string
		s    *Session
		off  int
		qfi  uint8
		want string
	}{
		{name: "QFI over 6 bits", s: s, off: 1, qfi: 64, want: "QFI 64"},
		{name: "no headroom", s: s, off: 0, qfi: 1, want: "headroom"},
		{name: "offset beyond the buffer", s: s, off: 11, qfi: 1, want: "offset"},
		{name: "negative offset", s: s, off: -1, qfi: 1, want: "offset"},
		{name: "unmapped, no default", s: noDefault, off: 1, qfi: 7, want: "no default DRB"},
	} {
		before := bytes.Clone(buf)
		if _, _, err := tc.s.Downlink(buf, tc.off, tc.qfi, false); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one about %q", tc.name, err, tc.want)
		}
		if !bytes.Equal(buf, before) {
			t.Errorf("%s: the buffer changed", tc.name)
		}
	}
	// Without a DL header no headroom is needed.
	if drb, start, err := noDefault.Downlink(buf, 0, 2, false); err != nil || drb != 3 || start != 0 {
		t.Errorf("DRB without DL header: %d %d %v", drb, start, err)
	}
}

func TestUplink(t *testing.T) {
	s := session(t)
	payload := []byte{0x60, 1, 2}
	for _, tc := range []struct {
		name string
		drb  uint8
		pdu  []byte
		want Uplink
	}{
		{name: "data PDU", drb: 1, pdu: append([]byte{0b10_000001}, payload...), want: Uplink{QFI: 1, SDU: payload}},
		{name: "R bit ignored", drb: 1, pdu: append([]byte{0b11_001001}, payload...), want: Uplink{QFI: 9, SDU: payload}},
		{name: "unmapped flow on the default DRB", drb: 1, pdu: append([]byte{0b10_011111}, payload...), want: Uplink{QFI: 31, SDU: payload}},
		{name: "empty SDU", drb: 1, pdu: []byte{0b10_000001}, want: Uplink{QFI: 1, SDU: []byte{}}},
		{name: "end marker", drb: 1, pdu: []byte{0b00_001001}, want: Uplink{QFI: 9, EndMarker: true}},
		{name: "no UL header: the DRB's flow", drb: 2, pdu: payload, want: Uplink{QFI: 5, SDU: payload}},
	} {
		got, err := s.Uplink(tc.drb, tc.pdu)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got.QFI != tc.want.QFI || got.EndMarker != tc.want.EndMarker || !bytes.Equal(got.SDU, tc.want.SDU) ||
			(got.SDU == nil) != (tc.want.SDU == nil) {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
	for _, tc := range []struct {
		name string
		drb  uint8
		pdu  []byte
		want string
	}{
		{name: "empty PDU", drb: 1, pdu: nil, want: "empty"},
		{name: "unknown DRB", drb: 3, pdu: payload, want: "DRB 3"},
		{name: "DRB 0", drb: 0, pdu: payload, want: "DRB 0"},
		{name: "DRB over 32", drb: 40, pdu: payload, want: "DRB 40"},
	} {
		if _, err := s.Uplink(tc.drb, tc.pdu); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one about %q", tc.name, err, tc.want)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	both := func(id uint8, qfis ...uint8) DRB {
		d := DRB{ID: id, HeaderDL: true, HeaderUL: true}
		for _, q := range qfis {
			d.Flows = append(d.Flows, Flow{QFI: q})
		}
		return d
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{name: "DRB 0", cfg: Config{DRBs: []DRB{both(0, 1)}}, want: "DRB ID 0"},
		{name: "DRB 33", cfg: Config{DRBs: []DRB{both(33, 1)}}, want: "DRB ID 33"},
		{name: "DRB twice", cfg: Config{DRBs: []DRB{both(1, 1), both(1, 2)}}, want: "twice"},
		{name: "QFI 64", cfg: Config{DRBs: []DRB{both(1, 64)}}, want: "QFI 64"},
		{name: "QFI on two DRBs", cfg: Config{DRBs: []DRB{both(1, 4), both(2, 4)}}, want: "QFI 4 mapped to DRB 1 and DRB 2"},
		{name: "no UL header, two flows", cfg: Config{DRBs: []DRB{{ID: 1, Flows: []Flow{{QFI: 1}, {QFI: 2}}}}}, want: "exactly one"},
		{name: "no UL header, no flow", cfg: Config{DRBs: []DRB{{ID: 1}}}, want: "exactly one"},
		{name: "RDI without DL header", cfg: Config{DRBs: []DRB{{ID: 1, HeaderUL: true, Flows: []Flow{{QFI: 1, RDI: true}}}}}, want: "RDI"},
		{name: "default DRB not configured", cfg: Config{DRBs: []DRB{both(1, 1)}, DefaultDRB: 2}, want: "default DRB 2"},
		{name: "default DRB without UL header", cfg: Config{DRBs: []DRB{{ID: 1, Flows: []Flow{{QFI: 1}}}}, DefaultDRB: 1}, want: "UL header"},
	} {
		if _, err := NewSession(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one about %q", tc.name, err, tc.want)
		}
	}
}

func BenchmarkDownlink(b *testing.B) {
	s := session(b)
	buf := make([]byte, 1500)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := s.Downlink(buf, 64, 9, true); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkUplink(b *testing.B) {
	s := session(b)
	pdu := append([]byte{ulDataHeader(1)}, make([]byte, 1400)...)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Uplink(1, pdu); err != nil {
			b.Fatal(err)
		}
	}
}

// The UE's side of the headers, which the tests play.

// parseDLHeader decodes the octet of a DL SDAP header.
func parseDLHeader(b byte) DLHeader {
	return DLHeader{RDI: b&bitRDI != 0, RQI: b&bitRQI != 0, QFI: b & qfiBits}
}

// ulDataHeader is the header of a UL SDAP data PDU carrying qfi (37.324
// 6.2.2.3): D/C = 1, R = 0.
func ulDataHeader(qfi uint8) byte { return bitDC | qfi&qfiBits }

// endMarker is the UL end-marker control PDU for qfi (37.324 6.2.3): the
// UE's last PDU of that QoS flow on a DRB it has been moved away from.
func endMarker(qfi uint8) byte { return qfi & qfiBits }

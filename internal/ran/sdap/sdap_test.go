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
		{"DL QFI 9", DLHeader{QFI: 9}.Octet(), 0b00_001001},
		{"DL RDI", DLHeader{RDI: true, QFI: 63}.Octet(), 0b10_111111},
		{"DL RQI", DLHeader{RQI: true, QFI: 1}.Octet(), 0b01_000001},
		{"DL both", DLHeader{RDI: true, RQI: true, QFI: 0}.Octet(), 0b11_000000},
		{"UL data", ULDataHeader(9), 0b10_001001},
		{"UL end marker", EndMarker(9), 0b00_001001},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %08b, want %08b", tc.name, tc.got, tc.want)
		}
	}
	if h := ParseDLHeader(0b10_101010); h != (DLHeader{RDI: true, QFI: 42}) {
		t.Errorf("ParseDLHeader = %+v", h)
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
		{"mapped, DL header", 1, false, 1, 1, 0b00_000001},
		{"RQI from N3", 1, true, 1, 1, 0b01_000001},
		{"RDI configured", 9, false, 1, 1, 0b10_001001},
		{"both", 9, true, 1, 1, 0b11_001001},
		{"no DL header: SDU unchanged", 5, true, 2, 2, 0},
		{"unmapped flow to the default DRB", 33, false, 1, 1, 0b00_100001},
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
		{"QFI over 6 bits", s, 1, 64, "QFI 64"},
		{"no headroom", s, 0, 1, "headroom"},
		{"offset beyond the buffer", s, 11, 1, "offset"},
		{"negative offset", s, -1, 1, "offset"},
		{"unmapped, no default", noDefault, 1, 7, "no default DRB"},
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
		{"data PDU", 1, append([]byte{0b10_000001}, payload...), Uplink{QFI: 1, SDU: payload}},
		{"R bit ignored", 1, append([]byte{0b11_001001}, payload...), Uplink{QFI: 9, SDU: payload}},
		{"unmapped flow on the default DRB", 1, append([]byte{0b10_011111}, payload...), Uplink{QFI: 31, SDU: payload}},
		{"empty SDU", 1, []byte{0b10_000001}, Uplink{QFI: 1, SDU: []byte{}}},
		{"end marker", 1, []byte{0b00_001001}, Uplink{QFI: 9, EndMarker: true}},
		{"no UL header: the DRB's flow", 2, payload, Uplink{QFI: 5, SDU: payload}},
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
		{"empty PDU", 1, nil, "empty"},
		{"unknown DRB", 3, payload, "DRB 3"},
		{"DRB 0", 0, payload, "DRB 0"},
		{"DRB over 32", 40, payload, "DRB 40"},
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
		{"DRB 0", Config{DRBs: []DRB{both(0, 1)}}, "DRB ID 0"},
		{"DRB 33", Config{DRBs: []DRB{both(33, 1)}}, "DRB ID 33"},
		{"DRB twice", Config{DRBs: []DRB{both(1, 1), both(1, 2)}}, "twice"},
		{"QFI 64", Config{DRBs: []DRB{both(1, 64)}}, "QFI 64"},
		{"QFI on two DRBs", Config{DRBs: []DRB{both(1, 4), both(2, 4)}}, "QFI 4 mapped to DRB 1 and DRB 2"},
		{"no UL header, two flows", Config{DRBs: []DRB{{ID: 1, Flows: []Flow{{QFI: 1}, {QFI: 2}}}}}, "exactly one"},
		{"no UL header, no flow", Config{DRBs: []DRB{{ID: 1}}}, "exactly one"},
		{"RDI without DL header", Config{DRBs: []DRB{{ID: 1, HeaderUL: true, Flows: []Flow{{QFI: 1, RDI: true}}}}}, "RDI"},
		{"default DRB not configured", Config{DRBs: []DRB{both(1, 1)}, DefaultDRB: 2}, "default DRB 2"},
		{"default DRB without UL header", Config{DRBs: []DRB{{ID: 1, Flows: []Flow{{QFI: 1}}}}, DefaultDRB: 1}, "UL header"},
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
	pdu := append([]byte{ULDataHeader(1)}, make([]byte, 1400)...)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Uplink(1, pdu); err != nil {
			b.Fatal(err)
		}
	}
}

package nru

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/xdp5g/xdp5g/internal/upf/gtpu"
)

// The frames below are written octet by octet from 38.425 figures
// 5.5.2.1-1 and 5.5.2.2-1: PDU type in the high nibble of the first octet,
// flags from the most significant bit down, SNs in 3 octets, padding to
// 4k-2 octets.

var userDataFrames = []struct {
	name  string
	d     DLUserData
	frame []byte
}{
	{name: "SN and polling", d: DLUserData{SN: 0x123456, ReportPolling: true},
		frame: []byte{0x01, 0x00, 0x12, 0x34, 0x56, 0 /* padding */}},
	{name: "no flags, SN 0", d: DLUserData{},
		frame: []byte{0x00, 0x00, 0, 0, 0, 0}},
	{name: "every field", d: DLUserData{
		SN: 0x000102, ReportPolling: true, RequestOutOfSeqReport: true, UserDataExistence: true,
		AssistanceInfoPolling: true, Retransmission: true,
		Flush: true, DiscardSN: 0x000a0b,
		DiscardBlocks:   []DiscardBlock{{Start: 0x010203, Size: 4}, {Start: 0x020304, Size: 0xff}},
		ReportDelivered: true, ReportSN: 0x03ffff,
	}, frame: []byte{
		0x07,             // type 0, spare, DL discard blocks, DL flush, report polling
		0x1f,             // spare ×3, out-of-seq, report delivered, user data, assistance, retransmission
		0x00, 0x01, 0x02, // NR-U SN
		0x00, 0x0a, 0x0b, // DL discard NR PDCP PDU SN
		0x02,                   // DL discard number of blocks
		0x01, 0x02, 0x03, 0x04, // start, size
		0x02, 0x03, 0x04, 0xff,
		0x03, 0xff, 0xff, // DL report NR PDCP PDU SN
		0, 0, // padding: 20 octets to 22
	}},
	{name: "report delivered only", d: DLUserData{SN: MaxSN, ReportDelivered: true, ReportSN: 7},
		frame: []byte{0x00, 0x08, 0xff, 0xff, 0xff, 0x00, 0x00, 0x07, 0, 0}},
}

var statusFrames = []struct {
	name  string
	s     DeliveryStatus
	frame []byte
}{
	{name: "desired buffer size only", s: DeliveryStatus{DesiredBufferSize: 0x00010000},
		frame: []byte{0x10, 0x00, 0x00, 0x01, 0x00, 0x00}},
	{name: "highest delivered and transmitted", s: DeliveryStatus{DesiredBufferSize: 100000,
		HasHighestDelivered: true, HighestDeliveredSN: 0xffe, HasHighestTransmitted: true, HighestTransmittedSN: 0xfff},
		frame: []byte{0x1c, 0x00, 0x00, 0x01, 0x86, 0xa0, 0x00, 0x0f, 0xfe, 0x00, 0x0f, 0xff, 0, 0}},
	{name: "every field", s: DeliveryStatus{
		FinalFrame:         true,
		HasDesiredDataRate: true, DesiredDataRate: 0x0a0b0c0d,
		LostRanges:          []SNRange{{Start: 5, End: 7}},
		HasHighestDelivered: true, HighestDeliveredSN: 0x010101,
		HasHighestTransmitted: true, HighestTransmittedSN: 0x020202,
		HasCause: true, Cause: CauseDLRadioLinkOutage,
		HasHighestDeliveredRetransmitted: true, HighestDeliveredRetransmittedSN: 0x030303,
		HasHighestRetransmitted: true, HighestRetransmittedSN: 0x040404,
		DeliveredRanges: []SNRange{{Start: 0x10, End: 0x12}, {Start: 0x20, End: 0x20}},
	}, frame: []byte{
		0x1f,       // type 1, highest transmitted, highest delivered, final frame, lost packet report
		0x1f,       // spare ×3, delivered ranges, data rate, retransmitted, delivered retransmitted, cause
		0, 0, 0, 0, // desired buffer size
		0x0a, 0x0b, 0x0c, 0x0d, // desired data rate
		0x01, 0, 0, 5, 0, 0, 7, // lost NR-U SN ranges
		0x01, 0x01, 0x01, // highest delivered NR PDCP SN
		0x02, 0x02, 0x02, // highest transmitted NR PDCP SN
		0x04,             // cause value
		0x03, 0x03, 0x03, // highest delivered retransmitted NR PDCP SN
		0x04, 0x04, 0x04, // highest retransmitted NR PDCP SN
		0x02, 0, 0, 0x10, 0, 0, 0x12, 0, 0, 0x20, 0, 0, 0x20, // delivered out-of-sequence ranges
		0, 0, 0, // padding: 43 octets to 46
	}},
}

// frame is what DLUserData and DeliveryStatus have in common.
type frame[T any] interface {
	*T
	Len() int
	Put([]byte) (int, error)
	Decode([]byte) error
}

// checkFrame checks that v encodes to want and want decodes to v.
func checkFrame[T any, P frame[T]](t *testing.T, name string, v T, want []byte, typ PDUType) {
	t.Helper()
	if n := P(&v).Len(); n != len(want) || (n+2)%4 != 0 {
		t.Errorf("%s: Len %d, want %d", name, n, len(want))
	}
	b := bytes.Repeat([]byte{0xee}, len(want)+3)
	n, err := P(&v).Put(b)
	if err != nil || !bytes.Equal(b[:n], want) {
		t.Errorf("%s: Put %x, %v\nwant %x", name, b[:n], err, want)
	}
	var got T
	if err := P(&got).Decode(want); err != nil || !reflect.DeepEqual(normal(got), normal(v)) {
		t.Errorf("%s: Decode %+v, %v", name, got, err)
	}
	if got, err := TypeOf(want); err != nil || got != typ {
		t.Errorf("%s: TypeOf %v, %v", name, got, err)
	}
}

func TestDLUserData(t *testing.T) {
	for _, tc := range userDataFrames {
		checkFrame(t, tc.name, tc.d, tc.frame, TypeDLUserData)
	}
}

func TestDeliveryStatus(t *testing.T) {
	for _, tc := range statusFrames {
		checkFrame(t, tc.name, tc.s, tc.frame, TypeDLDataDeliveryStatus)
	}
	// Decode reuses the arrays of the range lists.
	s := DeliveryStatus{LostRanges: make([]SNRange, 0, 4)}
	array := &s.LostRanges[:1][0]
	if err := s.Decode(statusFrames[2].frame); err != nil || &s.LostRanges[0] != array {
		t.Errorf("Decode did not reuse the lost ranges' array: %v", err)
	}
}

// normal makes the empty lists of v nil: Decode keeps the arrays it was
// given, empty or not.
func normal[T any](v T) T {
	switch x := any(&v).(type) {
	case *DLUserData:
		if len(x.DiscardBlocks) == 0 {
			x.DiscardBlocks = nil
		}
	case *DeliveryStatus:
		if len(x.LostRanges) == 0 {
			x.LostRanges = nil
		}
		if len(x.DeliveredRanges) == 0 {
			x.DeliveredRanges = nil
		}
	}
	return v
}

// Every frame cut before its last flagged field ends is refused, naming
// what is missing; without its padding it is read.
func TestTruncated(t *testing.T) {
	full := userDataFrames[2].frame[:20]
	for n := range len(full) {
		var d DLUserData
		if err := d.Decode(full[:n]); err == nil || !strings.Contains(err.Error(), "truncated") {
			t.Errorf("DL USER DATA of %d octets: %v", n, err)
		}
	}
	var d DLUserData
	if err := d.Decode(full); err != nil {
		t.Errorf("DL USER DATA without padding: %v", err)
	}

	status := statusFrames[2].frame[:43]
	for n := range len(status) {
		s := DeliveryStatus{DesiredBufferSize: 77}
		if err := s.Decode(status[:n]); err == nil || !strings.Contains(err.Error(), "truncated") {
			t.Errorf("DL DATA DELIVERY STATUS of %d octets: %v", n, err)
		}
		if s.DesiredBufferSize != 77 {
			t.Errorf("a failed Decode changed the status: %+v", s)
		}
	}
	var s DeliveryStatus
	if err := s.Decode(status); err != nil {
		t.Errorf("DL DATA DELIVERY STATUS without padding: %v", err)
	}
	err := s.Decode([]byte{0x1c, 0x00, 0x00, 0x01, 0x86, 0xa0, 0x00, 0x0f, 0xfe, 0x00, 0x0f})
	if err == nil || !strings.Contains(err.Error(), "highest transmitted NR PDCP SN") {
		t.Errorf("the field missing is not named: %v", err)
	}
}

func TestDecodeErrors(t *testing.T) {
	var d DLUserData
	var s DeliveryStatus
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{name: "status as user data", err: d.Decode(statusFrames[0].frame), want: "not DL USER DATA"},
		{name: "user data as status", err: s.Decode(userDataFrames[0].frame), want: "not DL DATA DELIVERY STATUS"},
		{name: "assistance information as status", err: s.Decode([]byte{0x20, 0, 0, 0, 0, 0}), want: "ASSISTANCE INFORMATION, not"},
		{name: "no discard blocks", err: d.Decode([]byte{0x04, 0, 0, 0, 1, 0}), want: "flagged but none"},
		{name: "no lost ranges", err: s.Decode([]byte{0x11, 0, 0, 0, 0, 0, 0}), want: "number of lost NR-U SN ranges is 0"},
		{name: "no delivered ranges", err: s.Decode([]byte{0x10, 0x10, 0, 0, 0, 0, 0}), want: "delivered out-of-sequence NR PDCP SN ranges is 0"},
		{name: "empty status", err: s.Decode(nil), want: "truncated"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error about %q", tc.name, tc.err, tc.want)
		}
	}
	if _, err := TypeOf(nil); err == nil {
		t.Error("TypeOf an empty frame")
	}
	if typ, err := TypeOf([]byte{0x2f, 0xff}); err != nil || typ != TypeAssistanceInformation || typ.String() != "ASSISTANCE INFORMATION" {
		t.Errorf("TypeOf assistance information: %v, %v", typ, err)
	}
}

func TestPutErrors(t *testing.T) {
	many := make([]SNRange, 256)
	for _, tc := range []struct {
		name string
		put  func([]byte) (int, error)
		buf  int
		want string
	}{
		{name: "short buffer", put: (&DLUserData{}).Put, buf: 5, want: "6-octet"},
		{name: "NR-U SN over 24 bits", put: (&DLUserData{SN: 1 << 24}).Put, buf: 64, want: "3 octets"},
		{name: "discard SN over 24 bits", put: (&DLUserData{Flush: true, DiscardSN: 1 << 24}).Put, buf: 64, want: "3 octets"},
		{name: "block start over 24 bits", put: (&DLUserData{DiscardBlocks: []DiscardBlock{{Start: 1 << 24, Size: 1}}}).Put, buf: 64, want: "3 octets"},
		{name: "256 discard blocks", put: (&DLUserData{DiscardBlocks: make([]DiscardBlock, 256)}).Put, buf: 2048, want: "256 discard blocks"},
		{name: "short status buffer", put: (&DeliveryStatus{HasCause: true}).Put, buf: 6, want: "10-octet"},
		{name: "status SN over 24 bits", put: (&DeliveryStatus{HasHighestTransmitted: true, HighestTransmittedSN: 1 << 24}).Put, buf: 64, want: "3 octets"},
		{name: "range end over 24 bits", put: (&DeliveryStatus{LostRanges: []SNRange{{Start: 1, End: 1 << 24}}}).Put, buf: 64, want: "3 octets"},
		{name: "256 ranges", put: (&DeliveryStatus{LostRanges: many}).Put, buf: 2048, want: "over 255"},
		{name: "frame over 255 units of an extension header", put: (&DeliveryStatus{LostRanges: many[:170]}).Put, buf: 2048, want: "over the 1018"},
	} {
		b := make([]byte, tc.buf)
		if _, err := tc.put(b); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error about %q", tc.name, err, tc.want)
		}
		if !bytes.Equal(b, make([]byte, tc.buf)) {
			t.Errorf("%s: the buffer was written", tc.name)
		}
	}
}

// A frame travels in a G-PDU's NR RAN Container as gtpu writes and reads
// it: length in units of 4 octets, the frame, no next extension header.
func TestExtension(t *testing.T) {
	pdcp := []byte{0x80, 0x01, 0x45}
	for _, tc := range []struct {
		frame []byte
		units byte
	}{{frame: userDataFrames[0].frame, units: 2}, {frame: statusFrames[2].frame, units: 12}} {
		b := make([]byte, gtpu.GPDUHeaderLen(len(tc.frame))+len(pdcp))
		n := gtpu.PutGPDUHeader(b, 1, len(pdcp), ExtensionType, tc.frame)
		copy(b[n:], pdcp)
		want := append(append([]byte{ExtensionType, tc.units}, tc.frame...), 0)
		if !bytes.Equal(b[11:n], want) {
			t.Errorf("extension header % x, want % x", b[11:n], want)
		}
		h, err := gtpu.ParseHeader(b)
		if err != nil || !bytes.Equal(h.NRRAN, tc.frame) || !bytes.Equal(b[h.Len:h.End], pdcp) {
			t.Errorf("read back %+v, %v", h, err)
		}
	}
	if want := []byte{0x01, 0x00, 0x12, 0x34, 0x56, 0x00}; !bytes.Equal(userDataFrames[0].frame, want) {
		t.Errorf("DL USER DATA of NR-U SN 0x123456 % x, want % x", userDataFrames[0].frame, want)
	}
}

// FuzzDecode decodes arbitrary frames as either type and extension
// headers: nothing panics, and what decodes encodes to a frame that decodes
// to the same value.
func FuzzDecode(f *testing.F) {
	for _, tc := range userDataFrames {
		f.Add(tc.frame)
	}
	for _, tc := range statusFrames {
		f.Add(tc.frame)
	}
	f.Add([]byte{0x02, 0x01, 0x00, 0x12, 0x34, 0x56, 0x00, 0x00})
	f.Fuzz(func(t *testing.T, frame []byte) {
		var d, d2 DLUserData
		if d.Decode(frame) == nil {
			b := make([]byte, d.Len())
			if _, err := d.Put(b); err != nil {
				t.Fatalf("decoded %+v does not encode: %v", d, err)
			}
			if err := d2.Decode(b); err != nil || !reflect.DeepEqual(normal(d), normal(d2)) {
				t.Fatalf("%+v re-decoded as %+v, %v", d, d2, err)
			}
		}
		var s, s2 DeliveryStatus
		if s.Decode(frame) == nil {
			b := make([]byte, s.Len())
			if _, err := s.Put(b); err != nil {
				t.Fatalf("decoded %+v does not encode: %v", s, err)
			}
			if err := s2.Decode(b); err != nil || !reflect.DeepEqual(normal(s), normal(s2)) {
				t.Fatalf("%+v re-decoded as %+v, %v", s, s2, err)
			}
		}
		_, _ = TypeOf(frame)
	})
}

func BenchmarkPut(b *testing.B) {
	d := DLUserData{SN: 1, ReportPolling: true}
	buf := make([]byte, 64)
	b.ReportAllocs()
	for b.Loop() {
		d.SN++
		d.SN &= MaxSN
		if _, err := d.Put(buf); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeStatus(b *testing.B) {
	frame := statusFrames[2].frame
	var s DeliveryStatus
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Decode(frame); err != nil {
			b.Fatal(err)
		}
	}
}

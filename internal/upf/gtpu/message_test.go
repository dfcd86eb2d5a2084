package gtpu

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// The messages below are built with gopacket, the independent encoder, and
// IEs written byte by byte from TS 29.281 8.

// serialize encodes a GTP-U header with gopacket, the IEs as its payload.
func serialize(tb testing.TB, h *layers.GTPv1U, ies []byte) []byte {
	tb.Helper()
	h.Version, h.ProtocolType = 1, 1
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true}, h, gopacket.Payload(ies)); err != nil {
		tb.Fatal(err)
	}
	return bytes.Clone(buf.Bytes())
}

// teidDataI is a TEID Data I IE (TS 29.281 8.3): TV, type 16.
func teidDataI(teid uint32) []byte { return binary.BigEndian.AppendUint32([]byte{16}, teid) }

// peerAddress is a GTP-U Peer Address IE (TS 29.281 8.4): TLV, type 133.
func peerAddress(a netip.Addr) []byte {
	ie := binary.BigEndian.AppendUint16([]byte{133}, uint16(a.BitLen()/8))
	return append(ie, a.AsSlice()...)
}

// recovery is a Recovery IE (TS 29.281 8.2): TV, type 14.
var recovery = []byte{14, 0}

// privateExtension is a Private Extension IE (TS 29.281 8.6): TLV, type
// 255, an enterprise ID and a value.
var privateExtension = []byte{255, 0, 3, 0x12, 0x34, 0x56}

// udpPortExtension is a UDP Port extension header (TS 29.281 5.2.2.1), as
// an Error Indication may carry.
var udpPortExtension = []layers.GTPExtensionHeader{{Type: 0x40, Content: []byte{0x9c, 0x40}}}

func errorIndication(tb testing.TB, teid uint32, peer netip.Addr, ext []layers.GTPExtensionHeader) []byte {
	h := &layers.GTPv1U{MessageType: MsgErrorIndication, SequenceNumberFlag: true, SequenceNumber: 9, GTPExtensionHeaders: ext}
	return serialize(tb, h, append(teidDataI(teid), peerAddress(peer)...))
}

func echoResponseFromPeer(tb testing.TB, seq uint16) []byte {
	h := &layers.GTPv1U{MessageType: MsgEchoResponse, SequenceNumberFlag: true, SequenceNumber: seq}
	return serialize(tb, h, append(bytes.Clone(recovery), privateExtension...))
}

func TestDecode(t *testing.T) {
	gnb := netip.MustParseAddr("192.0.2.7")
	gnb6 := netip.MustParseAddr("2001:db8::7")
	for _, tc := range []struct {
		name string
		b    []byte
		want message
	}{
		{name: "Error Indication", b: errorIndication(t, 0xdeadbeef, gnb, nil),
			want: message{Type: MsgErrorIndication, Seq: 9, HasSeq: true, TEIDDataI: 0xdeadbeef, HasTEIDDataI: true, PeerAddr: gnb}},
		{name: "Error Indication, IPv6 peer, UDP Port extension", b: errorIndication(t, 1, gnb6, udpPortExtension),
			want: message{Type: MsgErrorIndication, Seq: 9, HasSeq: true, TEIDDataI: 1, HasTEIDDataI: true, PeerAddr: gnb6}},
		{name: "Echo Response with a Private Extension", b: echoResponseFromPeer(t, 0xfffe),
			want: message{Type: MsgEchoResponse, Seq: 0xfffe, HasSeq: true}},
		{name: "Echo Request", b: serialize(t, &layers.GTPv1U{MessageType: MsgEchoRequest, SequenceNumberFlag: true, SequenceNumber: 3}, nil),
			want: message{Type: MsgEchoRequest, Seq: 3, HasSeq: true}},
		{name: "End Marker", b: serialize(t, &layers.GTPv1U{MessageType: MsgEndMarker, TEID: 77}, nil),
			want: message{Type: MsgEndMarker, TEID: 77}},
		{name: "G-PDU: the payload is no IEs", b: serialize(t, &layers.GTPv1U{MessageType: MsgGPDU, TEID: 5,
			GTPExtensionHeaders: []layers.GTPExtensionHeader{{Type: 0x85, Content: []byte{0x10, 9}}}}, []byte{0x45, 0, 0, 20}),
			want: message{Type: MsgGPDU, TEID: 5}},
		{name: "trailing octets ignored", b: append(serialize(t, &layers.GTPv1U{MessageType: MsgEndMarker, TEID: 1}, nil), 0, 0),
			want: message{Type: MsgEndMarker, TEID: 1}},
		{name: "E flag, next type 0", b: []byte{0x34, MsgEndMarker, 0, 4, 0, 0, 0, 1, 0, 0, 0, 0},
			want: message{Type: MsgEndMarker, TEID: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decode(tc.b)
			if err != nil {
				t.Fatalf("decode(% x): %v", tc.b, err)
			}
			if got != tc.want {
				t.Errorf("decode(% x) = %+v, want %+v", tc.b, got, tc.want)
			}
		})
	}
}

// malformed are datagrams decode must reject, each for one reason.
var malformed = map[string][]byte{
	"empty":                       {},
	"short header":                {0x32, MsgEchoResponse, 0, 6, 0, 0, 0},
	"version 2":                   {0x50, MsgEndMarker, 0, 0, 0, 0, 0, 1},
	"GTP'":                        {0x20, MsgEndMarker, 0, 0, 0, 0, 0, 1},
	"length beyond datagram":      {0x30, MsgEndMarker, 0, 1, 0, 0, 0, 1},
	"optional fields truncated":   {0x32, MsgEchoRequest, 0, 2, 0, 0, 0, 0, 0, 1},
	"extension header length 0":   {0x34, MsgEndMarker, 0, 8, 0, 0, 0, 1, 0, 0, 0, 0x40, 0, 0, 0, 0},
	"extension header overruns":   {0x34, MsgEndMarker, 0, 8, 0, 0, 0, 1, 0, 0, 0, 0x40, 2, 0, 0, 0},
	"extension chain unended":     {0x34, MsgEndMarker, 0, 8, 0, 0, 0, 1, 0, 0, 0, 0x40, 1, 0, 0, 0x40},
	"echo without sequence":       {0x30, MsgEchoResponse, 0, 2, 0, 0, 0, 0, 14, 0},
	"unknown TV IE":               {0x32, MsgEchoResponse, 0, 6, 0, 0, 0, 0, 0, 1, 0, 0, 15, 0},
	"TV IE truncated":             {0x32, MsgErrorIndication, 0, 7, 0, 0, 0, 0, 0, 1, 0, 0, 16, 0, 0},
	"TLV IE header truncated":     {0x32, MsgEchoResponse, 0, 6, 0, 0, 0, 0, 0, 1, 0, 0, 133, 0},
	"TLV IE truncated":            {0x32, MsgEchoResponse, 0, 8, 0, 0, 0, 0, 0, 1, 0, 0, 133, 0, 4, 10},
	"peer address of 5 octets":    {0x32, MsgErrorIndication, 0, 17, 0, 0, 0, 0, 0, 1, 0, 0, 16, 0, 0, 0, 1, 133, 0, 5, 10, 0, 0, 1, 0},
	"Error Indication, no TEID":   {0x32, MsgErrorIndication, 0, 11, 0, 0, 0, 0, 0, 1, 0, 0, 133, 0, 4, 10, 0, 0, 1},
	"Error Indication, no peer":   {0x32, MsgErrorIndication, 0, 9, 0, 0, 0, 0, 0, 1, 0, 0, 16, 0, 0, 0, 1},
	"IE cut by the header length": {0x32, MsgErrorIndication, 0, 15, 0, 0, 0, 0, 0, 1, 0, 0, 16, 0, 0, 0, 1, 133, 0, 4, 10, 0, 0, 1},
}

func TestDecodeMalformed(t *testing.T) {
	for name, b := range malformed {
		if m, err := decode(b); err == nil {
			t.Errorf("%s: decode(% x) = %+v, want an error", name, b, m)
		}
	}
}

// TestEncode decodes what this package sends with gopacket.
func TestEncode(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    []byte
		want layers.GTPv1U
		ies  []byte
	}{
		{name: "Echo Request", b: echoRequest(0xabcd), want: layers.GTPv1U{MessageType: MsgEchoRequest, SequenceNumberFlag: true, SequenceNumber: 0xabcd, MessageLength: 4}, ies: nil},
		{name: "Echo Response", b: EchoResponse(7), want: layers.GTPv1U{MessageType: MsgEchoResponse, SequenceNumberFlag: true, SequenceNumber: 7, MessageLength: 6}, ies: recovery},
		{name: "End Marker", b: endMarker(0x01020304), want: layers.GTPv1U{MessageType: MsgEndMarker, TEID: 0x01020304}, ies: nil},
	} {
		var g layers.GTPv1U
		if err := g.DecodeFromBytes(tc.b, gopacket.NilDecodeFeedback); err != nil {
			t.Fatalf("%s: gopacket: %v", tc.name, err)
		}
		if g.Version != 1 || g.ProtocolType != 1 || g.MessageType != tc.want.MessageType || g.TEID != tc.want.TEID ||
			g.MessageLength != tc.want.MessageLength || g.SequenceNumberFlag != tc.want.SequenceNumberFlag ||
			g.SequenceNumber != tc.want.SequenceNumber || g.ExtensionHeaderFlag || g.NPDUFlag {
			t.Errorf("%s: gopacket decodes % x as %+v", tc.name, tc.b, g)
		}
		if !bytes.Equal(g.Payload, tc.ies) {
			t.Errorf("%s: IEs % x, want % x", tc.name, g.Payload, tc.ies)
		}
	}
}

// FuzzDecode checks that decode never panics, and that what it accepts
// gopacket reads the same header from.
func FuzzDecode(f *testing.F) {
	for _, b := range malformed {
		f.Add(b)
	}
	for _, b := range [][]byte{
		errorIndication(f, 0xdeadbeef, netip.MustParseAddr("192.0.2.7"), udpPortExtension),
		errorIndication(f, 1, netip.MustParseAddr("2001:db8::7"), nil),
		echoResponseFromPeer(f, 1),
		echoRequest(2),
		EchoResponse(3),
		endMarker(4),
	} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decode(b)
		if err != nil {
			return
		}
		if m.Type != b[1] || m.TEID != binary.BigEndian.Uint32(b[4:8]) {
			t.Fatalf("decode(% x) = %+v: header fields misread", b, m)
		}
		// gopacket takes E with next type 0 to mean one extension header
		// follows; TS 29.281 5.1 says none does.
		if b[0]&flagE != 0 && b[11] == 0 {
			return
		}
		var g layers.GTPv1U
		if err := g.DecodeFromBytes(b, gopacket.NilDecodeFeedback); err != nil {
			t.Fatalf("decode accepts % x, gopacket does not: %v", b, err)
		}
		if g.MessageType != m.Type || g.TEID != m.TEID || g.SequenceNumberFlag != m.HasSeq || m.HasSeq && g.SequenceNumber != m.Seq {
			t.Fatalf("decode(% x) = %+v, gopacket reads %+v", b, m, g)
		}
	})
}

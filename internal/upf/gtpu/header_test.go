package gtpu

import (
	"bytes"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// A G-PDU header written here is what gopacket reads, and ParseHeader
// reads back each extension's content and where the T-PDU starts.
func TestPutGPDUHeader(t *testing.T) {
	payload := []byte("a user packet")
	for _, c := range []struct {
		ext     uint8
		content []byte
	}{
		{ext: 0, content: nil},
		{ext: ExtPDUSessionContainer, content: []byte{0x10, 0x09}},              // UL PDU SESSION INFORMATION, QFI 9
		{ext: ExtNRRANContainer, content: []byte{0x00, 0x00, 0x01, 0x02, 0x03}}, // 5 octets: padded to 8
		{ext: ExtNRRANContainer, content: bytes.Repeat([]byte{7}, 10)},          // exactly 12 with length and next type
	} {
		b := make([]byte, GPDUHeaderLen(len(c.content))+len(payload))
		n := PutGPDUHeader(b, 0x01020304, len(payload), c.ext, c.content)
		copy(b[n:], payload)

		var g layers.GTPv1U
		if err := g.DecodeFromBytes(b, gopacket.NilDecodeFeedback); err != nil {
			t.Fatalf("gopacket cannot read % x: %v", b, err)
		}
		if g.TEID != 0x01020304 || g.MessageType != MsgGPDU || int(g.MessageLength) != len(b)-8 || !bytes.Equal(g.Payload, payload) {
			t.Errorf("gopacket reads %+v from % x", g, b)
		}
		h, err := ParseHeader(b)
		if err != nil || h.Len != n || h.End != len(b) || h.TEID != 0x01020304 {
			t.Fatalf("ParseHeader(% x) = %+v, %v", b, h, err)
		}
		got := h.PDUSession
		if c.ext == ExtNRRANContainer {
			got = h.NRRAN
		}
		if c.content == nil {
			if len(g.GTPExtensionHeaders) != 0 || h.PDUSession != nil || h.NRRAN != nil {
				t.Errorf("an extension where none was written: % x", b)
			}
			continue
		}
		if len(g.GTPExtensionHeaders) != 1 || g.GTPExtensionHeaders[0].Type != c.ext {
			t.Fatalf("gopacket reads extensions %+v", g.GTPExtensionHeaders)
		}
		padded := append(bytes.Clone(c.content), make([]byte, extLen(len(c.content))-2-len(c.content))...)
		if !bytes.Equal(got, padded) || !bytes.Equal(g.GTPExtensionHeaders[0].Content, padded) {
			t.Errorf("content % x (gopacket % x), want % x", got, g.GTPExtensionHeaders[0].Content, padded)
		}
	}
}

// A PDU Session Container's content reads and writes as TS 38.415 lays
// it out.
func TestPDUSession(t *testing.T) {
	if typ, qfi, rqi, ok := PDUSession([]byte{0x00, 0x49, 0xff}); typ != PDUSessionDL || qfi != 9 || !rqi || !ok {
		t.Errorf("DL content read as type %d, QFI %d, RQI %v, %v", typ, qfi, rqi, ok)
	}
	if _, _, _, ok := PDUSession([]byte{0x10}); ok {
		t.Error("a one-octet content read")
	}
	if got := PDUSessionContent(PDUSessionUL, 0x49); got != [2]byte{0x10, 0x09} {
		t.Errorf("UL content for QFI 9: % x", got)
	}
}

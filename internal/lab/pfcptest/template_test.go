package pfcptest

import (
	"bytes"
	"net/netip"
	"testing"
)

// TestEstablishmentsAsGoPFCPEncodes compares the patched template with
// go-pfcp's encoding of the same request.
func TestEstablishmentsAsGoPFCPEncodes(t *testing.T) {
	smf, err := NewSMF("smf.xdp5g.test", netip.MustParseAddrPort("127.0.0.1:8805"))
	if err != nil {
		t.Fatal(err)
	}
	defer smf.Close()
	gnb := netip.MustParseAddr("10.100.3.1")
	e, err := smf.Establishments(gnb, 9)
	if err != nil {
		t.Fatal(err)
	}
	ue := netip.MustParseAddr("100.64.1.2")
	want, err := AppendMessage(nil, smf.PDUSessionRequest(0x0102030405060708, ue, gnb, 0xa0b0c0d0, 9))
	if err != nil {
		t.Fatal(err)
	}
	got := e.Append([]byte("kept"), 0x0102030405060708, ue, 0xa0b0c0d0)
	if !bytes.Equal(got, append([]byte("kept"), want...)) {
		t.Errorf("got\n%x\nwant\n%x", got, want)
	}
}

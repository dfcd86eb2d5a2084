package pfcptest

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/wmnsk/go-pfcp/ie"
)

// Establishments encodes the requests of PDUSessionRequest for many
// sessions to one gNB: go-pfcp encodes one, and each request is a copy with
// the CP SEID (and the SMF's TEID from it), the UE address and the gNB's
// TEID written in.
type Establishments struct {
	template            []byte
	seid, teid, smfTEID int // where they start in template
	ue                  [2]int
}

// Establishments prepares the encoding of PDUSessionRequest(cpSEID, ue,
// gnb, gnbTEID, qfi) for any cpSEID, ue (IPv4) and gnbTEID.
func (s *SMF) Establishments(gnb netip.Addr, qfi uint8) (*Establishments, error) {
	req := s.PDUSessionRequest(1, netip.IPv4Unspecified(), gnb, 1, qfi)
	e := &Establishments{}
	var err error
	if e.template, err = AppendMessage(nil, req); err != nil {
		return nil, err
	}
	payloads := map[uint16][]int{}
	walkIEs(e.template, sessionHeaderLen, func(typ uint16, at, _ int) { payloads[typ] = append(payloads[typ], at) })
	// The first outer header creation is FAR 2's, to the gNB; the second
	// FAR 3's, to the SMF.
	fseid, ue, ohc := payloads[ie.FSEID], payloads[ie.UEIPAddress], payloads[ie.OuterHeaderCreation]
	if len(fseid) != 1 || len(ue) != 2 || len(ohc) != 2 {
		return nil, fmt.Errorf("the request has %d F-SEIDs, %d UE IP addresses, %d outer header creations; want 1, 2, 2",
			len(fseid), len(ue), len(ohc))
	}
	// Past the flags of the F-SEID and the UE IP Address, the description
	// of the outer header creation (§8.2.37, §8.2.62, §8.2.56).
	e.seid, e.ue, e.teid, e.smfTEID = fseid[0]+1, [2]int{ue[0] + 1, ue[1] + 1}, ohc[0]+2, ohc[1]+2
	return e, nil
}

// Append appends the request for a session to b.
func (e *Establishments) Append(b []byte, cpSEID uint64, ue netip.Addr, gnbTEID uint32) []byte {
	n := len(b)
	b = append(b, e.template...)
	m := b[n:]
	binary.BigEndian.PutUint64(m[e.seid:], cpSEID)
	a := ue.As4()
	copy(m[e.ue[0]:], a[:])
	copy(m[e.ue[1]:], a[:])
	binary.BigEndian.PutUint32(m[e.teid:], gnbTEID)
	binary.BigEndian.PutUint32(m[e.smfTEID:], uint32(cpSEID))
	return b
}

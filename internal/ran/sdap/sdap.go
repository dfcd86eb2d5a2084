// Package sdap is the SDAP layer of the CU-UP (TS 37.324): it maps the QoS
// flows of a PDU session to its data radio bearers and adds or removes the
// one-octet SDAP headers in place.
//
// A Session is built once from its configuration and never changes
// afterwards, so any number of goroutines may use it at the same time; a
// new QoS flow to DRB mapping is a new Session swapped in by the caller.
// Nothing here allocates per packet.
package sdap

import (
	"errors"
	"fmt"
)

// HeaderLen is the length of every SDAP header and control PDU (37.324 6.2).
const HeaderLen = 1

// MaxQFI is the highest QoS flow identifier: the field has 6 bits.
const MaxQFI = 63

// MaxDRB is the highest DRB identity (TS 38.331 DRB-Identity).
const MaxDRB = 32

const (
	bitRDI  = 0x80 // DL: reflective QoS flow to DRB mapping indication
	bitRQI  = 0x40 // DL: reflective QoS indication
	bitDC   = 0x80 // UL: 1 for a data PDU, 0 for a control PDU
	qfiBits = 0x3f
)

// DLHeader is the header of a DL SDAP data PDU (37.324 6.2.2.2).
type DLHeader struct {
	RDI bool // the UE is to store the QoS flow to DRB mapping reflectively
	RQI bool // NAS is to be told of the reflective QoS (SDF to QoS flow) update
	QFI uint8
}

// Octet encodes the header; QFI is cut to its 6 bits.
func (h DLHeader) Octet() byte {
	b := h.QFI & qfiBits
	if h.RDI {
		b |= bitRDI
	}
	if h.RQI {
		b |= bitRQI
	}
	return b
}

// DRB is the SDAP configuration of one data radio bearer of a session
// (TS 38.331 SDAP-Config).
type DRB struct {
	ID uint8 // 1 to MaxDRB
	// HeaderDL and HeaderUL are sdap-HeaderDL and sdap-HeaderUL present.
	HeaderDL, HeaderUL bool
	Flows              []Flow // the QoS flows mapped to the DRB
}

// Flow is a QoS flow mapped to a DRB.
type Flow struct {
	QFI uint8
	// RDI asks the UE to map this flow reflectively: every DL PDU of the
	// flow carries RDI = 1. It needs the DRB's DL header.
	RDI bool
}

// Config is the SDAP configuration of a PDU session.
type Config struct {
	DRBs []DRB
	// DefaultDRB carries the downlink of QoS flows mapped to no DRB
	// (37.324 5.2.1); 0 when the session has none.
	DefaultDRB uint8
}

type drbState struct {
	configured, headerDL, headerUL bool
	onlyQFI                        uint8 // the one flow of a DRB without UL header
}

// Session is the SDAP entity of a PDU session.
type Session struct {
	flowDRB    [MaxQFI + 1]uint8 // 0: not mapped
	flowRDI    [MaxQFI + 1]bool
	drbs       [MaxDRB + 1]drbState
	defaultDRB uint8
}

// NewSession checks cfg and builds the session. As TS 38.331 requires, a
// default DRB has an UL header, and a DRB without one carries exactly one
// QoS flow, so that the QFI of what it receives is known.
func NewSession(cfg Config) (*Session, error) {
	s := &Session{defaultDRB: cfg.DefaultDRB}
	for _, d := range cfg.DRBs {
		if d.ID == 0 || d.ID > MaxDRB {
			return nil, fmt.Errorf("DRB ID %d out of 1..%d", d.ID, MaxDRB)
		}
		st := &s.drbs[d.ID]
		if st.configured {
			return nil, fmt.Errorf("DRB %d configured twice", d.ID)
		}
		*st = drbState{configured: true, headerDL: d.HeaderDL, headerUL: d.HeaderUL}
		if !d.HeaderUL && len(d.Flows) != 1 {
			return nil, fmt.Errorf("DRB %d has no SDAP UL header and %d QoS flows: it needs exactly one", d.ID, len(d.Flows))
		}
		for _, f := range d.Flows {
			if f.QFI > MaxQFI {
				return nil, fmt.Errorf("DRB %d: QFI %d out of 0..%d", d.ID, f.QFI, MaxQFI)
			}
			if other := s.flowDRB[f.QFI]; other != 0 {
				return nil, fmt.Errorf("QFI %d mapped to DRB %d and DRB %d", f.QFI, other, d.ID)
			}
			if f.RDI && !d.HeaderDL {
				return nil, fmt.Errorf("QFI %d: RDI needs an SDAP DL header, which DRB %d has not", f.QFI, d.ID)
			}
			s.flowDRB[f.QFI], s.flowRDI[f.QFI] = d.ID, f.RDI
			st.onlyQFI = f.QFI
		}
	}
	if d := cfg.DefaultDRB; d != 0 {
		if d > MaxDRB || !s.drbs[d].configured {
			return nil, fmt.Errorf("default DRB %d is not configured", d)
		}
		if !s.drbs[d].headerUL {
			return nil, fmt.Errorf("default DRB %d has no SDAP UL header", d)
		}
	}
	return s, nil
}

// ErrNoDRB is returned for a downlink QoS flow that is mapped to no DRB in
// a session without a default DRB.
var ErrNoDRB = errors.New("QoS flow mapped to no DRB and the session has no default DRB")

// Downlink maps a downlink packet of QoS flow qfi to its DRB (an unmapped
// flow goes to the default DRB) and, when that DRB has a DL header, writes
// the header in the octet before the SDU at buf[off:]. It returns the DRB
// and where the SDAP PDU starts, off or off-1.
//
// rqi is the RQI the packet came with on N3 (TS 38.415 PDU Session
// Container); a DRB without a DL header cannot carry it, and it is then
// dropped. RDI comes from the flow's configuration.
func (s *Session) Downlink(buf []byte, off int, qfi uint8, rqi bool) (drb uint8, start int, err error) {
	if qfi > MaxQFI {
		return 0, off, fmt.Errorf("QFI %d out of 0..%d", qfi, MaxQFI)
	}
	if off < 0 || off > len(buf) {
		return 0, off, fmt.Errorf("SDU offset %d outside a %d-octet buffer", off, len(buf))
	}
	drb = s.flowDRB[qfi]
	if drb == 0 {
		drb = s.defaultDRB
	}
	if drb == 0 {
		return 0, off, ErrNoDRB
	}
	if !s.drbs[drb].headerDL {
		return drb, off, nil
	}
	if off < HeaderLen {
		return 0, off, errors.New("no headroom for the SDAP header")
	}
	buf[off-1] = DLHeader{RDI: s.flowRDI[qfi], RQI: rqi, QFI: qfi}.Octet()
	return drb, off - 1, nil
}

// Uplink is what an UL SDAP PDU received on a DRB carried.
type Uplink struct {
	QFI uint8
	// EndMarker reports an end-marker control PDU: the UE sends no more of
	// flow QFI on this DRB. SDU is then nil.
	EndMarker bool
	SDU       []byte // the SDAP SDU, within the PDU given to Session.Uplink
}

// Uplink reads an UL SDAP PDU received on drb: the QFI from its header, or,
// on a DRB without UL header, the DRB's one QoS flow. A QFI the UE marks is
// taken as it is, whichever DRB it came on: a UE sends flows it has no
// mapping for on the default DRB, and flows being remapped on the old DRB
// until their end marker (37.324 5.2.1, 5.3).
func (s *Session) Uplink(drb uint8, pdu []byte) (Uplink, error) {
	if drb == 0 || drb > MaxDRB || !s.drbs[drb].configured {
		return Uplink{}, fmt.Errorf("DRB %d is not configured", drb)
	}
	st := &s.drbs[drb]
	if !st.headerUL {
		return Uplink{QFI: st.onlyQFI, SDU: pdu}, nil
	}
	if len(pdu) < HeaderLen {
		return Uplink{}, errors.New("empty UL SDAP PDU")
	}
	h := pdu[0]
	if h&bitDC == 0 {
		return Uplink{QFI: h & qfiBits, EndMarker: true}, nil
	}
	return Uplink{QFI: h & qfiBits, SDU: pdu[HeaderLen:]}, nil
}

package n4

import (
	"time"

	"github.com/wmnsk/go-pfcp/ie"

	"github.com/xdp5g/xdp5g/internal/upf/buffer"
	"github.com/xdp5g/xdp5g/internal/upf/session"
)

// Buffering (TS 29.244 §5.2.1): a FAR whose apply action is BUFF keeps a
// session's downlink packets (the buffer package); with NOCP, the first one
// is reported to the SMF in a Downlink Data Report, after the BAR's
// Downlink Data Notification Delay if it has one.

// BufferLimits is what the handler needs of the buffer manager.
type BufferLimits interface {
	SetLimit(seid uint64, packets int)
}

// bar is a session's Buffering Action Rule (at most one per session).
type bar struct {
	id uint8
	// suggested is the Suggested Buffering Packets Count, 0 when absent:
	// the session's buffer limit.
	suggested uint8
	ddnDelay  time.Duration // Downlink Data Notification Delay
}

// Data Status flag (§8.2.181): the first packet was buffered.
const dataStatusBUFF = 0x02

// bufferLimit is the session's buffer limit for the manager: 0 for the
// default.
func (s *pfcpSession) bufferLimit() int {
	if s == nil || s.bar == nil {
		return 0
	}
	return int(s.bar.suggested)
}

// Buffered is told of the first packet a buffering FAR holds (the buffer
// manager's Notify): with NOCP, the SMF gets a Downlink Data Report.
func (h *Handler) Buffered(o buffer.Owner, pdrID uint16, qfi uint8) {
	h.apart(func() { h.buffered(o, pdrID, qfi) })
}

func (h *Handler) buffered(o buffer.Owner, pdrID uint16, qfi uint8) {
	s := h.sessions[o.SEID]
	if s == nil || !s.notify[o.FAR] {
		return
	}
	var delay time.Duration
	if s.bar != nil {
		delay = s.bar.ddnDelay
	}
	if delay == 0 {
		h.reportDownlinkData(s, o.FAR, pdrID, qfi)
		return
	}
	time.AfterFunc(delay, func() {
		h.apart(func() {
			if now := h.sessions[o.SEID]; now != nil && now.notify[o.FAR] {
				h.reportDownlinkData(now, o.FAR, pdrID, qfi)
			}
		})
	})
}

// reportDownlinkData queues a Downlink Data Report (§7.5.8.2) for a FAR
// that still buffers.
func (h *Handler) reportDownlinkData(s *pfcpSession, far uint32, pdrID uint16, qfi uint8) {
	if f, _ := farRules.get(s.fars, far); f.Action != session.ActionBuffer {
		return
	}
	dldr := []*ie.IE{ie.NewPDRID(pdrID)}
	if qfi != 0 {
		dldr = append(dldr, ie.NewDownlinkDataServiceInformation(false, true, 0, qfi))
	}
	dldr = append(dldr, ie.NewDataStatus(dataStatusBUFF))
	h.newReport(s, ie.NewReportType(0, 0, 0, 1), ie.NewDownlinkDataReport(dldr...))
	h.cfg.Log.Debug("downlink data report", "seid", s.seid, "far", far, "pdr", pdrID)
}

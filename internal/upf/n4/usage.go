package n4

import (
	"time"

	"github.com/wmnsk/go-pfcp/ie"

	"github.com/xdp5g/xdp5g/internal/upf/upfxdp"
)

// Reporting Triggers (§8.2.19) and Usage Report Trigger (§8.2.41) flags,
// octet 5 in bits 0-7, octet 6 in bits 8-15, octet 7 in bits 16-23. The
// triggers implemented here but QUVTI sit at the same place in both IEs, so
// a URR's triggers mask what fired into what is reported.
const (
	trigPERIO = 1 << 0
	trigVOLTH = 1 << 1
	trigTIMTH = 1 << 2
	trigSTART = 1 << 4
	trigSTOPT = 1 << 5
	trigVOLQU = 1 << 8
	trigTIMQU = 1 << 9
	trigQUVTI = 1 << 15 // Reporting Triggers only: see usageReportTrigger

	implementedTriggers = trigPERIO | trigVOLTH | trigTIMTH | trigSTART | trigSTOPT | trigVOLQU | trigTIMQU | trigQUVTI

	// Usage Report Trigger only.
	reportIMMER = 1 << 7
	reportTERMR = 1 << 11
	reportQUVTI = 1 << 19
)

// usageReportTrigger turns fired triggers into the Usage Report Trigger's
// flags: QUVTI is the one implemented trigger at another place there.
func usageReportTrigger(fired uint32) uint32 {
	if fired&trigQUVTI != 0 {
		fired = fired&^trigQUVTI | reportQUVTI
	}
	return fired
}

// Measurement Information flags (§8.2.68) the UPF honours.
const (
	miMBQE = 0x01 // measure before QoS enforcement
	miISTM = 0x08 // time metering starts now, not at the first packet
	miMNOP = 0x10 // report packet counts too
)

// Volume Measurement flags (§8.2.44): volumes, then packet counts.
const (
	vmVolumes = 0x07 // TOVOL, ULVOL, DLVOL
	vmPackets = 0x38 // TONOP, ULNOP, DLNOP
)

// urr is a Usage Reporting Rule as the SMF set it.
type urr struct {
	id               uint32
	volume, duration bool // measurement methods
	triggers         uint32
	period           time.Duration
	volThreshold     [3]uint64 // upfxdp.URRTotal, URRUplink, URRDownlink; 0: none
	volQuota         [3]uint64
	timeThreshold    time.Duration
	timeQuota        time.Duration
	quotaValidity    time.Duration // QUVTI: how long a granted quota is valid
	beforeQoS        bool          // MBQE
	immediateStart   bool          // ISTM
	countPackets     bool          // MNOP
}

// timed says whether the URR has triggers the clock fires.
func (u urr) timed() bool { return u.triggers&(trigPERIO|trigTIMTH|trigSTOPT|trigTIMQU|trigQUVTI) != 0 }

// meter is what the UPF keeps of a URR between reports. A request works on
// copies, so a refused one leaves the meters as they were.
type meter struct {
	start time.Time       // of the measurement being made
	base  upfxdp.URRUsage // the counters at its start
	// periodStart is when the current measurement period began: periods
	// follow each other whatever else is reported.
	periodStart time.Time
	seqn        uint32 // UR-SEQN of the next report
	// started says traffic flows (START seen, STOPT not since); idlePackets
	// is the packet count when it last stopped.
	started     bool
	idlePackets uint64
	quotaBase   [3]uint64 // the counters when the volume quota was given
	exhausted   bool      // volume quota used up and reported
	// timeQuotaStart is when the time quota was given; blocked, when it ran
	// out, the counters' total: the URR then lets nothing more through.
	timeQuotaStart time.Time
	blocked        uint64
	// quotaGiven is when the SMF last granted a quota or a validity time;
	// expired, that the validity time since then was reported.
	quotaGiven time.Time
	expired    bool
}

// newMeter starts measuring a URR whose data-path counters read usage.
func newMeter(usage upfxdp.URRUsage, now time.Time) *meter {
	return &meter{start: now, base: usage, periodStart: now, quotaBase: usage.Bytes, timeQuotaStart: now, quotaGiven: now}
}

// rebase restarts the meter on data-path counters that started again from
// zero: what it had not reported of the old ones is lost, what the quota
// had used of them stays used (quotaBase wraps below the new zero, so that
// the quota's absolute limit is what was left of it).
func (m *meter) rebase() {
	for i := range 3 {
		m.quotaBase[i] -= m.base.Bytes[i]
	}
	m.base, m.idlePackets = upfxdp.URRUsage{}, 0
	if m.blocked != 0 {
		m.blocked = 1 // 0 would mean no quota
	}
}

// behind says whether the data path's counters are below the meter's base:
// they started again from zero since (the maps detached and pinned anew).
func (m *meter) behind(usage upfxdp.URRUsage) bool {
	for i := range 3 {
		if usage.Bytes[i] < m.base.Bytes[i] || usage.Packets[i] < m.base.Packets[i] {
			return true
		}
	}
	return false
}

// rebaseMeters rebases the meters of a restored session installed again
// (session.Restored's Repaired) whose URRs count from zero again, which
// would report their counts less the old base: volumes wrapped around to
// some 2^64 octets. Their limits follow.
func (h *Handler) rebaseMeters(s *pfcpSession) {
	for id, m := range s.meters {
		usage, err := h.cfg.Store.URRUsage(s.seid, id)
		if err != nil || !m.behind(usage) {
			continue
		}
		rebased := *m
		rebased.rebase()
		s.meters[id] = &rebased
		u := s.urrs[id]
		if err := h.cfg.Store.SetURRLimits(s.seid, id, u.limits(&rebased)); err != nil {
			h.cfg.Log.Error("a URR's limits after its counts started anew", "seid", s.seid, "urr", id, "err", err)
		}
	}
}

// limits are the absolute counter values the data path watches for a URR:
// its counters only grow, so thresholds and quotas are offsets from the
// counters at the start of the measurement and at the grant of the quota.
func (u *urr) limits(m *meter) upfxdp.URRLimits {
	var l upfxdp.URRLimits
	for i := range 3 {
		if u.triggers&trigVOLTH != 0 && u.volThreshold[i] != 0 {
			l.Threshold[i] = m.base.Bytes[i] + u.volThreshold[i]
		}
		if u.volQuota[i] != 0 {
			l.Quota[i] = m.quotaBase[i] + u.volQuota[i]
		}
	}
	if m.blocked != 0 {
		l.Quota[upfxdp.URRTotal] = m.blocked
	}
	l.NotifyStart = u.triggers&trigSTART != 0 && !m.started
	return l
}

// activeSince is how long the URR's traffic has been metered since from:
// from the first packet on, unless time metering starts at once (ISTM).
func (u *urr) activeSince(from time.Time, usage upfxdp.URRUsage, now time.Time) time.Duration {
	if !u.immediateStart {
		if usage.FirstPacket.IsZero() {
			return 0
		}
		from = later(from, usage.FirstPacket)
	}
	return max(now.Sub(from), 0)
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// due returns the Usage Report Trigger flags the clock raises at now;
// traffic has stopped after a silence of stopAfter.
func (u *urr) due(m *meter, usage upfxdp.URRUsage, now time.Time, stopAfter time.Duration) uint32 {
	var fired uint32
	if u.triggers&trigPERIO != 0 && now.Sub(m.periodStart) >= u.period {
		fired |= trigPERIO
	}
	if u.triggers&trigSTOPT != 0 && m.started && now.Sub(usage.LastPacket) >= stopAfter {
		fired |= trigSTOPT
	}
	if u.triggers&trigTIMTH != 0 && u.activeSince(m.start, usage, now) >= u.timeThreshold {
		fired |= trigTIMTH
	}
	if u.timeQuota != 0 && m.blocked == 0 && u.activeSince(m.timeQuotaStart, usage, now) >= u.timeQuota {
		fired |= trigTIMQU
	}
	// An expired quota is reported once and stays in force until the SMF
	// grants anew, as a Gy client asks again when a Validity-Time ends.
	if u.triggers&trigQUVTI != 0 && !m.expired && now.Sub(m.quotaGiven) >= u.quotaValidity {
		fired |= trigQUVTI
	}
	return fired
}

// crossed returns the Usage Report Trigger flags the counters raise: a
// volume threshold reached, or traffic seen for the first time or again
// after it stopped. (A volume quota is used up when the data path drops for
// it, which it says.)
func (u *urr) crossed(m *meter, usage upfxdp.URRUsage) uint32 {
	var fired uint32
	for i := range 3 {
		if u.triggers&trigVOLTH != 0 && u.volThreshold[i] != 0 && usage.Bytes[i]-m.base.Bytes[i] >= u.volThreshold[i] {
			fired |= trigVOLTH
		}
	}
	if !m.started && usage.Packets[upfxdp.URRTotal] > m.idlePackets {
		fired |= trigSTART
	}
	return fired
}

// note changes the meter for what fired at now, reported or not.
func (u *urr) note(m *meter, fired uint32, usage upfxdp.URRUsage, now time.Time) {
	if fired&trigPERIO != 0 {
		if m.periodStart = m.periodStart.Add(u.period); now.Sub(m.periodStart) >= u.period {
			m.periodStart = now // a stalled clock skips the periods it missed
		}
	}
	if fired&trigSTART != 0 {
		m.started = true
	}
	if fired&trigSTOPT != 0 {
		m.started, m.idlePackets = false, usage.Packets[upfxdp.URRTotal]
	}
	if fired&trigVOLQU != 0 {
		m.exhausted = true
	}
	if fired&trigTIMQU != 0 {
		m.blocked = max(usage.Bytes[upfxdp.URRTotal], 1) // 0 would mean no quota
	}
	if fired&trigQUVTI != 0 {
		m.expired = true
	}
}

// report makes a Usage Report of type typ (the IE type differs by message)
// for what was measured since the meter's start, and starts the next
// measurement. fired are the Usage Report Trigger flags; extra are further
// IEs of the report.
func (u *urr) report(typ uint16, m *meter, usage upfxdp.URRUsage, fired uint32, now time.Time, extra ...*ie.IE) *ie.IE {
	urt := usageReportTrigger(fired)
	children := []*ie.IE{ie.NewURRID(u.id), ie.NewURSEQN(m.seqn),
		ie.NewUsageReportTrigger(uint8(urt), uint8(urt>>8), uint8(urt>>16)),
		ie.NewStartTime(m.start), ie.NewEndTime(now)}
	if u.volume {
		flags, d := uint8(vmVolumes), usage.Bytes
		p := usage.Packets
		for i := range 3 {
			d[i] -= m.base.Bytes[i]
			p[i] -= m.base.Packets[i]
		}
		if !u.countPackets {
			p = [3]uint64{}
		} else {
			flags |= vmPackets
		}
		children = append(children, ie.NewVolumeMeasurement(flags, d[0], d[1], d[2], p[0], p[1], p[2]))
	}
	if u.duration {
		children = append(children, ie.NewDurationMeasurement(u.activeSince(m.start, usage, now).Truncate(time.Second)))
	}
	if !usage.FirstPacket.IsZero() && usage.Packets[upfxdp.URRTotal] > m.base.Packets[upfxdp.URRTotal] {
		children = append(children, ie.NewTimeOfFirstPacket(later(m.start, usage.FirstPacket)), ie.NewTimeOfLastPacket(usage.LastPacket))
	}
	m.seqn++
	m.start, m.base = now, usage
	return ie.NewUsageReport(typ, append(children, extra...)...)
}

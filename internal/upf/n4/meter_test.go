package n4

import (
	"testing"
	"time"

	"github.com/xdp5g/xdp5g/internal/upf/upfxdp"
)

// The triggers a URR's counters and the clock raise, and the limits the
// data path gets for the next measurement.
func TestMeterTriggers(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	traffic := func(total uint64, first time.Time) upfxdp.URRUsage {
		return upfxdp.URRUsage{Bytes: [3]uint64{total, total, 0}, Packets: [3]uint64{1, 1, 0}, FirstPacket: first, LastPacket: first}
	}

	quota := urr{id: 1, volume: true, triggers: trigVOLQU | trigVOLTH, volQuota: [3]uint64{1000}, volThreshold: [3]uint64{0, 300}}
	m := newMeter(upfxdp.URRUsage{}, t0)
	if l := quota.limits(m); l.Quota != [3]uint64{1000} || l.Threshold != [3]uint64{0, 300} {
		t.Errorf("limits %+v", l)
	}
	used := traffic(400, t0)
	if fired := quota.crossed(m, used); fired != trigVOLTH|trigSTART {
		t.Errorf("at 400 bytes fired %#x", fired)
	}
	quota.note(m, trigVOLTH|trigSTART, used, t0)
	quota.report(80, m, used, trigVOLTH, t0.Add(time.Second))
	// The threshold counts from the report; the quota from its grant.
	if l := quota.limits(m); l.Quota != [3]uint64{1000} || l.Threshold != [3]uint64{0, 700} || l.NotifyStart {
		t.Errorf("limits after the report %+v", l)
	}
	quota.note(m, trigVOLQU, traffic(1000, t0), t0)
	if !m.exhausted {
		t.Error("quota not marked used up")
	}

	// Time metering starts at the first packet unless ISTM.
	timed := urr{id: 2, duration: true, triggers: trigTIMTH | trigTIMQU, timeThreshold: 3 * time.Second, timeQuota: 10 * time.Second}
	m = newMeter(upfxdp.URRUsage{}, t0)
	if fired := timed.due(m, upfxdp.URRUsage{}, t0.Add(time.Hour), time.Minute); fired != 0 {
		t.Errorf("without traffic fired %#x", fired)
	}
	first := traffic(100, t0.Add(2*time.Second))
	if fired := timed.due(m, first, t0.Add(4*time.Second), time.Minute); fired != 0 {
		t.Errorf("2 s after the first packet fired %#x", fired)
	}
	if fired := timed.due(m, first, t0.Add(5*time.Second), time.Minute); fired != trigTIMTH {
		t.Errorf("3 s after the first packet fired %#x", fired)
	}
	if fired := timed.due(m, first, t0.Add(12*time.Second), time.Minute); fired != trigTIMTH|trigTIMQU {
		t.Errorf("10 s after the first packet fired %#x", fired)
	}
	timed.note(m, trigTIMQU, first, t0)
	if l := timed.limits(m); l.Quota[upfxdp.URRTotal] != 100 {
		t.Errorf("a used-up time quota lets traffic through: %+v", l)
	}
	timed.immediateStart = true
	if got := timed.activeSince(t0, upfxdp.URRUsage{}, t0.Add(7*time.Second)); got != 7*time.Second {
		t.Errorf("ISTM: active %v", got)
	}
}

// Periods follow each other whatever else is reported; a stalled clock
// skips the periods it missed.
func TestPeriodsKeepTheirCadence(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	u := urr{id: 1, volume: true, triggers: trigPERIO | trigVOLTH, period: 10 * time.Second, volThreshold: [3]uint64{100}}
	m := newMeter(upfxdp.URRUsage{}, t0)
	used := upfxdp.URRUsage{Bytes: [3]uint64{150, 150, 0}, Packets: [3]uint64{1, 1, 0}, FirstPacket: at(1), LastPacket: at(1)}
	u.note(m, trigVOLTH, used, at(4))
	u.report(80, m, used, trigVOLTH, at(4)) // the measurement restarts, the period does not
	for _, c := range []struct {
		at   float64
		want uint32
	}{
		{at: 9.9, want: 0}, {at: 10.05, want: trigPERIO}, {at: 19.9, want: 0}, {at: 20.1, want: trigPERIO},
		{at: 55, want: trigPERIO}, {at: 64, want: 0}, {at: 65, want: trigPERIO},
	} {
		fired := u.due(m, used, at(c.at), time.Minute)
		if fired != c.want {
			t.Errorf("at %vs fired %#x, want %#x", c.at, fired, c.want)
		}
		u.note(m, fired, used, at(c.at))
	}
}

// Traffic stops after a silence, and starts again with the next packet.
func TestStopAndStartOfTraffic(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	u := urr{id: 1, volume: true, triggers: trigSTART | trigSTOPT}
	m := newMeter(upfxdp.URRUsage{}, t0)
	packets := func(n uint64, last time.Time) upfxdp.URRUsage {
		return upfxdp.URRUsage{Bytes: [3]uint64{100 * n}, Packets: [3]uint64{n}, FirstPacket: t0, LastPacket: last}
	}
	stopAfter := 10 * time.Second
	if fired := u.due(m, upfxdp.URRUsage{}, t0.Add(time.Hour), stopAfter); fired != 0 {
		t.Errorf("no traffic ever: fired %#x", fired)
	}
	flowing := packets(3, t0.Add(time.Second))
	if fired := u.crossed(m, flowing); fired != trigSTART {
		t.Fatalf("first packets fired %#x", fired)
	}
	u.note(m, trigSTART, flowing, t0.Add(time.Second))
	if fired := u.due(m, flowing, t0.Add(10*time.Second), stopAfter); fired != 0 {
		t.Errorf("9 s of silence fired %#x", fired)
	}
	stopped := t0.Add(11 * time.Second)
	if fired := u.due(m, flowing, stopped, stopAfter); fired != trigSTOPT {
		t.Fatalf("10 s of silence fired %#x", fired)
	}
	u.note(m, trigSTOPT, flowing, stopped)
	if fired := u.crossed(m, flowing) | u.due(m, flowing, t0.Add(time.Hour), stopAfter); fired != 0 {
		t.Errorf("stopped traffic fired %#x again", fired)
	}
	if l := u.limits(m); !l.NotifyStart {
		t.Error("the data path is not asked for the next packet")
	}
	if fired := u.crossed(m, packets(4, t0.Add(time.Hour))); fired != trigSTART {
		t.Errorf("traffic again fired %#x", fired)
	}
}

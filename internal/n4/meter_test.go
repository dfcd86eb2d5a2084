package n4

import (
	"testing"
	"time"

	"github.com/xdp5g/xdp5g/internal/datapath"
)

// The triggers a URR's counters and the clock raise, and the limits the
// data path gets for the next measurement.
func TestMeterTriggers(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	traffic := func(total uint64, first time.Time) datapath.URRUsage {
		return datapath.URRUsage{Bytes: [3]uint64{total, total, 0}, Packets: [3]uint64{1, 1, 0}, FirstPacket: first, LastPacket: first}
	}

	quota := urr{id: 1, volume: true, triggers: trigVOLQU | trigVOLTH, volQuota: [3]uint64{1000}, volThreshold: [3]uint64{0, 300}}
	m := newMeter(datapath.URRUsage{}, t0)
	if l := quota.limits(m); l.Quota != [3]uint64{1000} || l.Threshold != [3]uint64{0, 300} {
		t.Errorf("limits %+v", l)
	}
	used := traffic(400, t0)
	if fired := quota.crossed(m, used); fired != trigVOLTH|trigSTART {
		t.Errorf("at 400 bytes fired %#x", fired)
	}
	m.note(trigVOLTH|trigSTART, used)
	quota.report(80, m, used, trigVOLTH, t0.Add(time.Second))
	// The threshold counts from the report; the quota from its grant.
	if l := quota.limits(m); l.Quota != [3]uint64{1000} || l.Threshold != [3]uint64{0, 700} || l.NotifyStart {
		t.Errorf("limits after the report %+v", l)
	}
	m.note(trigVOLQU, traffic(1000, t0))
	if !m.exhausted {
		t.Error("quota not marked used up")
	}

	// Time metering starts at the first packet unless ISTM.
	timed := urr{id: 2, duration: true, triggers: trigTIMTH | trigTIMQU, timeThreshold: 3 * time.Second, timeQuota: 10 * time.Second}
	m = newMeter(datapath.URRUsage{}, t0)
	if fired := timed.due(m, datapath.URRUsage{}, t0.Add(time.Hour)); fired != 0 {
		t.Errorf("without traffic fired %#x", fired)
	}
	first := traffic(100, t0.Add(2*time.Second))
	if fired := timed.due(m, first, t0.Add(4*time.Second)); fired != 0 {
		t.Errorf("2 s after the first packet fired %#x", fired)
	}
	if fired := timed.due(m, first, t0.Add(5*time.Second)); fired != trigTIMTH {
		t.Errorf("3 s after the first packet fired %#x", fired)
	}
	if fired := timed.due(m, first, t0.Add(12*time.Second)); fired != trigTIMTH|trigTIMQU {
		t.Errorf("10 s after the first packet fired %#x", fired)
	}
	m.note(trigTIMQU, first)
	if l := timed.limits(m); l.Quota[datapath.URRTotal] != 100 {
		t.Errorf("a used-up time quota lets traffic through: %+v", l)
	}
	timed.immediateStart = true
	if got := timed.activeSince(t0, datapath.URRUsage{}, t0.Add(7*time.Second)); got != 7*time.Second {
		t.Errorf("ISTM: active %v", got)
	}
}

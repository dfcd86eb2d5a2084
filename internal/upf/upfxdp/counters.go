package upfxdp

import (
	"fmt"
	"sync/atomic"

	"github.com/xdp5g/xdp5g/internal/platform/percpu"
)

// ReasonNames name the outcomes the data path counts (enum reason, in
// bpf/upf/reasons.h): each reason's name in lower case, without REASON_.
var ReasonNames = [reasonCount]string{
	upfReasonREASON_UPLINK_FORWARD:      "uplink_forward",
	upfReasonREASON_DOWNLINK_FORWARD:    "downlink_forward",
	upfReasonREASON_ECHO_RESPONSE:       "echo_response",
	upfReasonREASON_DROP_MALFORMED:      "drop_malformed",
	upfReasonREASON_DROP_UNKNOWN_TEID:   "drop_unknown_teid",
	upfReasonREASON_DROP_NO_PDR:         "drop_no_pdr",
	upfReasonREASON_DROP_FAR:            "drop_far",
	upfReasonREASON_DROP_NO_NEXTHOP:     "drop_no_nexthop",
	upfReasonREASON_DROP_TTL:            "drop_ttl",
	upfReasonREASON_DROP_INTERNAL:       "drop_internal",
	upfReasonREASON_DROP_QER_GATE:       "drop_qer_gate",
	upfReasonREASON_DROP_QER_MBR:        "drop_qer_mbr",
	upfReasonREASON_DROP_URR_QUOTA:      "drop_urr_quota",
	upfReasonREASON_BUFFERED:            "buffered",
	upfReasonREASON_DROP_BUFFER_FULL:    "drop_buffer_full",
	upfReasonREASON_PASS_NOT_IP:         "pass_not_ip",
	upfReasonREASON_PASS_NOT_OURS:       "pass_not_ours",
	upfReasonREASON_PASS_GTP_SIGNALLING: "pass_gtp_signalling",
	upfReasonREASON_PASS_FRAGMENT:       "pass_fragment",
	upfReasonREASON_PASS_NO_ROUTE:       "pass_no_route",
	upfReasonREASON_PASS_TTL:            "pass_ttl",
	upfReasonREASON_RELAY_FORWARD:       "relay_forward",
	upfReasonREASON_DUPLICATE:           "duplicate",
	upfReasonREASON_DROP_DUPLICATE:      "drop_duplicate",
}

// IfaceCounters are one interface's outcome counters, by reason name.
type IfaceCounters struct {
	Name    string             `json:"name"`
	Ifindex uint32             `json:"ifindex"`
	Reasons map[string]Counter `json:"reasons"`
	// Cold are the packets of installed keys that no record served (on
	// x86-64, where the data path has records): those found through their
	// PDR set, whose common case reads several tables where a record's
	// reads one.
	Cold Counter `json:"cold"`
}

// Counters sums the per-CPU counters of every interface slot in use.
func (d *Datapath) Counters() ([]IfaceCounters, error) {
	var out []IfaceCounters
	for slot := uint32(0); slot < maxIfaces; slot++ {
		var info upfIface
		if err := d.maps.Ifaces.Lookup(slot, &info); err != nil {
			return nil, err
		}
		if info.Ifindex == 0 {
			continue
		}
		c := IfaceCounters{Name: ifaceName(info), Ifindex: info.Ifindex, Reasons: map[string]Counter{}}
		for r, name := range ReasonNames {
			sum, err := percpu.Sum[Counter](d.maps.IfaceCounters, slot*uint32(reasonCount)+uint32(r))
			if err != nil {
				return nil, err
			}
			c.Reasons[name] = sum
		}
		if err := d.addForwarded(slot, c.Reasons); err != nil {
			return nil, err
		}
		cold, err := percpu.Sum[Counter](d.maps.ColdPackets, slot)
		if err != nil {
			return nil, err
		}
		c.Cold = cold
		out = append(out, c)
	}
	return out, nil
}

// UnknownTEIDPassed is how many G-PDUs to unknown TEIDs the data path
// passed to the kernel for an Error Indication, of those its
// drop_unknown_teid reason counts, since the maps were created.
func (d *Datapath) UnknownTEIDPassed() (uint64, error) {
	w, err := percpu.Sum[upfUnknownTeidWindow](d.maps.UnknownTeidWindows, uint32(0))
	return w.Total, err
}

// addForwarded adds to reasons what the data path counts of an interface
// slot's forwarded packets beside its CPUs' PDR copies (iface_cpu_lines),
// and what builds that counted only the uplink there left in iface_lines,
// not in its reason counters.
func (d *Datapath) addForwarded(slot uint32, reasons map[string]Counter) error {
	var lines []upfIfaceCpuLine
	if err := d.maps.IfaceCpuLines.Lookup(slot, &lines); err != nil {
		return err
	}
	var old []upfIfaceLine
	if err := d.maps.IfaceLines.Lookup(slot, &old); err != nil {
		return err
	}
	add := func(r upfReason, counts []Counter) {
		name := ReasonNames[r]
		reasons[name] = percpu.Total(append(counts, reasons[name]))
	}
	var up, down, relay []Counter
	for _, l := range lines {
		up = append(up, l.UplinkForward)
		down = append(down, l.DownlinkForward)
		relay = append(relay, l.RelayForward)
	}
	for _, l := range old {
		up = append(up, l.UplinkForward)
	}
	add(upfReasonREASON_UPLINK_FORWARD, up)
	add(upfReasonREASON_DOWNLINK_FORWARD, down)
	add(upfReasonREASON_RELAY_FORWARD, relay)
	return nil
}

// PDRCounter returns the packets and user-plane bytes a PDR slot matched:
// those its records served counted in their places, the others in its
// rows.
func (d *Datapath) PDRCounter(slot uint32) (Counter, error) {
	if slot >= d.pdrs.len() {
		return Counter{}, fmt.Errorf("PDR counter: slot %d of %d", slot, d.pdrs.len())
	}
	sum := d.sets.placedCount(slot)
	for cpu := range d.counterRows() {
		addTo(&sum, loadCounter(d.pdrCounter(cpu, slot)))
	}
	return sum, nil
}

// loadCounter reads a counter that the data path or another goroutine
// writes.
func loadCounter(c *Counter) Counter {
	return Counter{Packets: atomic.LoadUint64(&c.Packets), Bytes: atomic.LoadUint64(&c.Bytes)}
}

// addTo adds c to *sum, atomically: *sum may be read meanwhile.
func addTo(sum *Counter, c Counter) {
	atomic.AddUint64(&sum.Packets, c.Packets)
	atomic.AddUint64(&sum.Bytes, c.Bytes)
}

// CarryPDRCounter adds what PDR slot from counted to the counts of slot
// to that only the daemon writes (folded_counts): a PDR written again into
// another slot (its session modified) counts on from where it was.
func (d *Datapath) CarryPDRCounter(from, to uint32) error {
	if to >= d.pdrs.len() {
		return fmt.Errorf("carrying a PDR counter: slot %d of %d", to, d.pdrs.len())
	}
	c, err := d.PDRCounter(from)
	if err != nil {
		return err
	}
	d.sets.carry(to, c)
	return nil
}

// counterRows is the number of rows of PDR counters: possible CPUs.
func (d *Datapath) counterRows() uint32 { return d.pdrCounters.len() / d.pdrs.len() }

// pdrCounter is where CPU cpu counts what PDR slot matched.
func (d *Datapath) pdrCounter(cpu, slot uint32) *Counter {
	return d.pdrCounters.at(cpu*d.pdrs.len() + slot)
}

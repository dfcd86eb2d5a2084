package upfxdp

import (
	"fmt"
	"sync/atomic"

	"github.com/xdp5g/xdp5g/internal/platform/percpu"
)

// ReasonNames name the outcomes the data path counts, in the order of enum
// reason in bpf/types.h.
var ReasonNames = [reasonCount]string{
	"uplink_forward", "downlink_forward", "echo_response",
	"drop_malformed", "drop_unknown_teid", "drop_no_pdr", "drop_far", "drop_no_nexthop",
	"drop_ttl", "drop_internal", "drop_qer_gate", "drop_qer_mbr", "drop_urr_quota", "buffered", "drop_buffer_full",
	"pass_not_ip", "pass_not_ours", "pass_gtp_signalling", "pass_fragment", "pass_no_route", "pass_ttl",
	"relay_forward",
}

// IfaceCounters are one interface's outcome counters, by reason name.
type IfaceCounters struct {
	Name    string             `json:"name"`
	Ifindex uint32             `json:"ifindex"`
	Reasons map[string]Counter `json:"reasons"`
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
		out = append(out, c)
	}
	return out, nil
}

// PDRCounter returns the packets and user-plane bytes a PDR slot matched.
func (d *Datapath) PDRCounter(slot uint32) (Counter, error) {
	if slot >= d.pdrs.len() {
		return Counter{}, fmt.Errorf("PDR counter: slot %d of %d", slot, d.pdrs.len())
	}
	var sum Counter
	for cpu := range d.counterRows() {
		c := d.pdrCounter(cpu, slot)
		sum.Packets += atomic.LoadUint64(&c.Packets)
		sum.Bytes += atomic.LoadUint64(&c.Bytes)
	}
	return sum, nil
}

// counterRows is the number of rows of PDR counters: possible CPUs.
func (d *Datapath) counterRows() uint32 { return d.pdrCounters.len() / d.pdrs.len() }

// pdrCounter is where CPU cpu counts what PDR slot matched.
func (d *Datapath) pdrCounter(cpu, slot uint32) *Counter {
	return d.pdrCounters.at(cpu*d.pdrs.len() + slot)
}

package cuupxdp

import (
	"fmt"

	"github.com/xdp5g/xdp5g/internal/platform/percpu"
)

// Reason is where xdp_cuup sent a packet, and why.
type Reason int

// Reasons, in the order of enum cuup_reason in bpf/cuup.h.
const (
	Redirect          = Reason(cuupCuupReasonCUUP_REDIRECT)
	PassNoSocket      = Reason(cuupCuupReasonCUUP_PASS_NO_SOCKET)
	PassNotIP         = Reason(cuupCuupReasonCUUP_PASS_NOT_IP)
	PassFragment      = Reason(cuupCuupReasonCUUP_PASS_FRAGMENT)
	PassNotGTPU       = Reason(cuupCuupReasonCUUP_PASS_NOT_GTPU)
	PassSignalling    = Reason(cuupCuupReasonCUUP_PASS_SIGNALLING)
	PassUnknownTEID   = Reason(cuupCuupReasonCUUP_PASS_UNKNOWN_TEID)
	DropBadEthernet   = Reason(cuupCuupReasonCUUP_DROP_BAD_ETH)
	DropMalformed     = Reason(cuupCuupReasonCUUP_DROP_MALFORMED)
	DropNoPSC         = Reason(cuupCuupReasonCUUP_DROP_NO_PSC)
	DropPDUType       = Reason(cuupCuupReasonCUUP_DROP_PDU_TYPE)
	DropUnexpectedPSC = Reason(cuupCuupReasonCUUP_DROP_UNEXPECTED_PSC)
	DropEmpty         = Reason(cuupCuupReasonCUUP_DROP_EMPTY)
	DropNoMeta        = Reason(cuupCuupReasonCUUP_DROP_NO_META)
	NumReasons        = int(cuupCuupReasonCUUP_REASON_COUNT)
)

var reasonNames = [NumReasons]string{
	"redirect", "pass_no_socket", "pass_not_ip", "pass_fragment", "pass_not_gtpu", "pass_signalling",
	"pass_unknown_teid", "drop_bad_ethernet", "drop_malformed", "drop_no_psc", "drop_pdu_type",
	"drop_unexpected_psc", "drop_empty", "drop_no_meta",
}

func (r Reason) String() string {
	if r < 0 || int(r) >= NumReasons {
		return fmt.Sprintf("Reason(%d)", int(r))
	}
	return reasonNames[r]
}

// Counter is packets and their bytes.
type Counter = cuupCounter

// Counts are counters by Reason.
type Counts [NumReasons]Counter

// Stats are a role's counters, per CPU and summed.
type Stats struct {
	PerCPU []Counts
	Total  Counts
}

// Stats reads what a role's program counted since it was loaded.
func (d *Datapath) Stats(role Role) (Stats, error) {
	if err := role.check(); err != nil {
		return Stats{}, err
	}
	var st Stats
	var perCPU []Counter
	for r := range NumReasons {
		key := uint32(int(role-1)*NumReasons + r)
		if err := d.counters.Lookup(key, &perCPU); err != nil {
			return Stats{}, fmt.Errorf("cuupxdp: reading the %v counters: %w", role, err)
		}
		if st.PerCPU == nil {
			st.PerCPU = make([]Counts, len(perCPU))
		}
		for cpu, c := range perCPU {
			st.PerCPU[cpu][r] = c
		}
		st.Total[r] = percpu.Total(perCPU)
	}
	return st, nil
}

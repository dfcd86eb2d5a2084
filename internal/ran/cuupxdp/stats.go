package cuupxdp

import (
	"fmt"

	"github.com/xdp5g/xdp5g/internal/platform/percpu"
)

// Reason is where xdp_cuup sent a packet, and why.
type Reason int

// Reasons (enum cuup_reason, in bpf/cuup/reasons.h).
const (
	Redirect          = Reason(cuupCuupReasonCUUP_REDIRECT)
	PassNoSocket      = Reason(cuupCuupReasonCUUP_PASS_NO_SOCKET)
	PassNotIP         = Reason(cuupCuupReasonCUUP_PASS_NOT_IP)
	PassFragment      = Reason(cuupCuupReasonCUUP_PASS_FRAGMENT)
	PassNotGTPU       = Reason(cuupCuupReasonCUUP_PASS_NOT_GTPU)
	PassSignalling    = Reason(cuupCuupReasonCUUP_PASS_SIGNALLING)
	PassUnknownTEID   = Reason(cuupCuupReasonCUUP_PASS_UNKNOWN_TEID)
	DropBadEthernet   = Reason(cuupCuupReasonCUUP_DROP_BAD_ETHERNET)
	DropMalformed     = Reason(cuupCuupReasonCUUP_DROP_MALFORMED)
	DropNoPSC         = Reason(cuupCuupReasonCUUP_DROP_NO_PSC)
	DropPDUType       = Reason(cuupCuupReasonCUUP_DROP_PDU_TYPE)
	DropUnexpectedPSC = Reason(cuupCuupReasonCUUP_DROP_UNEXPECTED_PSC)
	DropEmpty         = Reason(cuupCuupReasonCUUP_DROP_EMPTY)
	DropNoMeta        = Reason(cuupCuupReasonCUUP_DROP_NO_META)
	NumReasons        = int(cuupCuupReasonCUUP_REASON_COUNT)
)

// reasonNames are each reason's name in lower case, without CUUP_.
var reasonNames = [NumReasons]string{
	Redirect:          "redirect",
	PassNoSocket:      "pass_no_socket",
	PassNotIP:         "pass_not_ip",
	PassFragment:      "pass_fragment",
	PassNotGTPU:       "pass_not_gtpu",
	PassSignalling:    "pass_signalling",
	PassUnknownTEID:   "pass_unknown_teid",
	DropBadEthernet:   "drop_bad_ethernet",
	DropMalformed:     "drop_malformed",
	DropNoPSC:         "drop_no_psc",
	DropPDUType:       "drop_pdu_type",
	DropUnexpectedPSC: "drop_unexpected_psc",
	DropEmpty:         "drop_empty",
	DropNoMeta:        "drop_no_meta",
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

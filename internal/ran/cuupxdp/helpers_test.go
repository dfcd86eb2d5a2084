package cuupxdp

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
)

// What the tests read of the tunnel table and of a packet's metadata.

// Tunnel returns a tunnel's bearer.
func (d *Datapath) Tunnel(teid uint32, role Role) (uint32, error) {
	if err := role.check(); err != nil {
		return 0, err
	}
	var t cuupCuupTunnel
	err := d.tunnels.Lookup(tunnelKey(teid, role), &t)
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		return 0, fmt.Errorf("%w: %v TEID %#x", ErrNoTunnel, role, teid)
	}
	return t.Bearer, err
}

// TPDU is the T-PDU of pkt, the packet m came with: the user packet on
// N3, the PDCP PDU on F1-U; nil when it is not inside pkt.
func (m *Meta) TPDU(pkt []byte) []byte { return span(pkt, m.TpduOff, m.TpduLen) }

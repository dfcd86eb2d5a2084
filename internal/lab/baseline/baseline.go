// Package baseline loads the minimal XDP programs of bpf/baseline.c: the
// yardsticks benchmarks compare the UPF against, and the XDP_PASS program a
// veth peer needs before XDP_REDIRECT or XDP_TX into it delivers.
package baseline

import (
	"fmt"
	"net"

	"github.com/cilium/ebpf"
)

// LoadTX loads a program that swaps the Ethernet addresses and bounces the
// frame out of the interface it came in on.
func LoadTX() (*ebpf.Program, error) {
	return load("xdp_tx_baseline", nil)
}

// LoadRedirect loads a program that rewrites the Ethernet addresses to
// dmac/smac and redirects the frame to ifindex.
func LoadRedirect(ifindex int, dmac, smac net.HardwareAddr) (*ebpf.Program, error) {
	if len(dmac) != 6 || len(smac) != 6 {
		return nil, fmt.Errorf("redirect baseline needs 6-byte MACs, got %v and %v", dmac, smac)
	}
	return load("xdp_redirect_baseline", map[string]any{
		"redirect_ifindex": uint32(ifindex),
		"redirect_dmac":    [6]byte(dmac),
		"redirect_smac":    [6]byte(smac),
	})
}

// LoadPass loads a program that passes every frame to the stack.
func LoadPass() (*ebpf.Program, error) {
	return load("xdp_pass", nil)
}

func load(name string, constants map[string]any) (*ebpf.Program, error) {
	spec, err := loadBaseline()
	if err != nil {
		return nil, err
	}
	for k, v := range constants {
		if err := spec.Variables[k].Set(v); err != nil {
			return nil, fmt.Errorf("set %s: %w", k, err)
		}
	}
	// A collection, not NewProgram: the constants live in a map to resolve.
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", name, err)
	}
	defer coll.Close()
	return coll.DetachProgram(name), nil
}

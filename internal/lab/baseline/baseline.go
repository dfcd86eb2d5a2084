// Package baseline loads the minimal XDP programs of bpf/lab/baseline.c:
// the yardsticks benchmarks compare the UPF against, and the XDP_PASS
// program a veth peer needs before XDP_REDIRECT or XDP_TX into it delivers.
package baseline

import (
	"errors"
	"fmt"
	"net"

	"github.com/cilium/ebpf"
)

// LoadTX loads a program that swaps the Ethernet addresses and bounces the
// frame out of the interface it came in on.
func LoadTX() (*ebpf.Program, error) {
	return load(nil, func(p *baselinePrograms) **ebpf.Program { return &p.XdpTxBaseline })
}

// LoadRedirect loads a program that rewrites the Ethernet addresses to
// dmac/smac and redirects the frame to ifindex.
func LoadRedirect(ifindex int, dmac, smac net.HardwareAddr) (*ebpf.Program, error) {
	if len(dmac) != 6 || len(smac) != 6 {
		return nil, fmt.Errorf("redirect baseline needs 6-byte MACs, got %v and %v", dmac, smac)
	}
	return load(func(v *baselineVariableSpecs) error {
		return errors.Join(v.RedirectIfindex.Set(uint32(ifindex)), v.RedirectDmac.Set([6]byte(dmac)),
			v.RedirectSmac.Set([6]byte(smac)))
	}, func(p *baselinePrograms) **ebpf.Program { return &p.XdpRedirectBaseline })
}

// LoadPass loads a program that passes every frame to the stack.
func LoadPass() (*ebpf.Program, error) {
	return load(nil, func(p *baselinePrograms) **ebpf.Program { return &p.XdpPass })
}

// load loads the programs with the constants configure sets, and keeps the
// one pick names.
func load(configure func(*baselineVariableSpecs) error, pick func(*baselinePrograms) **ebpf.Program) (*ebpf.Program, error) {
	spec, err := loadBaseline()
	if err != nil {
		return nil, err
	}
	if configure != nil {
		var vars baselineVariableSpecs
		if err := spec.Assign(&vars); err != nil {
			return nil, err
		}
		if err := configure(&vars); err != nil {
			return nil, fmt.Errorf("set the baseline's constants: %w", err)
		}
	}
	var progs baselinePrograms
	if err := spec.LoadAndAssign(&progs, nil); err != nil {
		return nil, fmt.Errorf("load the baselines: %w", err)
	}
	chosen := pick(&progs)
	prog := *chosen
	*chosen = nil // kept open
	if err := progs.Close(); err != nil {
		return nil, errors.Join(err, prog.Close())
	}
	return prog, nil
}

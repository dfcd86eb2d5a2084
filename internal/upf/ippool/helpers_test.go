package ippool

import (
	"fmt"
	"net/netip"
)

// What the tests do to a pool besides allocating.

// Reserve takes the unit holding addr, as if Allocate had handed it out.
func (p *Pool) Reserve(addr netip.Addr) error {
	i, err := p.index(addr)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.excluded[i]:
		return fmt.Errorf("ippool %v: %v is excluded", p.prefix, addr)
	case p.taken.get(i):
		return fmt.Errorf("ippool %v: %v is already allocated", p.prefix, addr)
	}
	// An entry in released becomes stale; Allocate skips it.
	p.take(i)
	return nil
}

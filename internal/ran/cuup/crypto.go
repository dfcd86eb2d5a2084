package cuup

import (
	"fmt"
	"sync"
)

// Placement is where a DRB's PDCP security (ciphering and integrity
// protection, both ways) runs: on the worker that carries its packets, or
// spread over the crypto pool's goroutines, and so over other cores, with
// the worker sending the downlink PDUs in their order once they are
// sealed and having the uplink receiver take its PDUs in the order they
// came once they are opened (the offloading of §VI of
// "Towards an eBPF+XDP based Framework for Open, Programmable and Scalable NextG RANs",
// on host cores).
type Placement uint32

// The placements.
const (
	Inline Placement = iota
	Pool
)

func (p Placement) String() string {
	if p == Pool {
		return "pool"
	}
	return "inline"
}

// MarshalText writes the placement's name.
func (p Placement) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText takes inline or pool.
func (p *Placement) UnmarshalText(b []byte) error {
	switch string(b) {
	case "inline":
		*p = Inline
	case "pool":
		*p = Pool
	default:
		return fmt.Errorf("%q is not a crypto placement: inline or pool", b)
	}
	return nil
}

// cryptoJob is a PDU's security, sealing or opening it, handed to the pool.
type cryptoJob interface {
	crypto()
	finish() // tells the batch it is done
}

// cryptoPool seals and opens PDUs on goroutines of their own.
type cryptoPool struct {
	jobs chan cryptoJob
	stop chan struct{}
	wg   sync.WaitGroup
}

func newCryptoPool(workers int) *cryptoPool {
	p := &cryptoPool{jobs: make(chan cryptoJob, 1024), stop: make(chan struct{})}
	for range workers {
		p.wg.Go(func() {
			for {
				select {
				case j := <-p.jobs:
					j.crypto()
					j.finish()
				case <-p.stop:
					return
				}
			}
		})
	}
	return p
}

// help runs jobs of the pool, anyone's, until none is waiting, then waits
// for those of done: a worker is a pool goroutine while its batch is out.
func (p *cryptoPool) help(done *sync.WaitGroup) {
	if p == nil {
		return
	}
	for {
		select {
		case j := <-p.jobs:
			j.crypto()
			j.finish()
		default:
			done.Wait()
			return
		}
	}
}

func (p *cryptoPool) close() {
	if p != nil {
		close(p.stop)
		p.wg.Wait()
	}
}

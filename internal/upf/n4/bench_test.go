package n4

import (
	"net/netip"
	"testing"
)

// BenchmarkSessionRequests times the handler over the requests of the PFCP
// bench's paced run, in turn: establishing an Open5GS-shaped session,
// moving the downlink tunnel of one established before, deleting that one;
// over a store holding 20,000 sessions, with go-pfcp's decoding of the
// request and encoding of the response (as root: go test -run - -bench
// SessionRequests -benchmem ./internal/upf/n4).
func BenchmarkSessionRequests(b *testing.B) {
	const held = 20000
	// Room for the slots the replaced rules hold for a second.
	e := newSizedEnv(b, 4*held)
	ue := func(n int) func(bool) []byte {
		a := netip.AddrFrom4([4]byte{10, 200, byte(n >> 8), byte(n)})
		return fixedUE(a.String())
	}
	established := 0
	establish := func() uint64 {
		established++
		ies := open5gs(uint64(established), ue(established%65536), uint32(established))
		// As Open5GS, a tunnel to the SMF with a TEID of the session's own.
		ies[len(ies)-1] = createFAR(farID(10), applyAction(aaFORW),
			fwdParams(destinationInterface(ifCPFunction), ohcGTPU(uint32(established), smfGTPU)))
		return e.establish("smf1", ies...).upSEID(b)
	}
	ring := make([]uint64, held)
	for i := range ring {
		ring[i] = establish()
	}
	k := 0
	for b.Loop() {
		next := establish()
		e.modify("smf1", ring[k], updateFAR(farID(2), updFwdParams(ohcGTPU(uint32(established)|1<<31, gnb)))).expect(b, causeAccepted, nil, nil)
		e.delete("smf1", ring[k]).expect(b, causeAccepted, nil, nil)
		ring[k], k = next, (k+1)%held
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(3*b.N), "ns/request")
}

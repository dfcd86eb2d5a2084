package pfcp

import (
	"math"
	"slices"
	"sync/atomic"
	"time"
)

// Stats counts the datagrams the server received and what it could not or
// would not serve, by reason.
type Stats struct {
	Received uint64 // datagrams

	// Datagrams dropped unread.
	NotAllowed uint64 // from a source outside Config.AllowedPeers

	// Messages dropped undecoded.
	Truncated   uint64 // datagram shorter than a message header, empty ones included
	BadLength   uint64 // length field past the end of the datagram, or bytes after the last message
	BadVersion  uint64 // PFCP version other than 1
	BadHeader   uint64 // S flag that does not fit the message type
	UnknownType uint64 // a message type the UPF does not serve
	Undecodable uint64 // IEs go-pfcp could not decode

	// Messages decoded but not served.
	Retransmissions    uint64 // requests answered from the response cache, or dropped while their first copy is served
	UnmatchedResponses uint64 // responses to no request of ours
	Overload           uint64 // requests dropped because the queue was full

	Panics uint64 // recovered while serving a datagram or request

	// Handling counts the requests answered by the time from reading the
	// request to sending its response: element i those that took at most
	// HandlingBound(i), and more than the bound before; the last also any
	// longer ones. Retransmissions answered from the cache do not count.
	Handling [HandlingBuckets]uint64
}

// HandlingBuckets is the length of Stats.Handling: five decades.
const HandlingBuckets = 5 * handlingPerDecade

// handlingPerDecade is fine enough for a percentile to tell 0.95 ms from
// 1 ms, a target's bound.
const handlingPerDecade = 40

// HandlingBound is the upper bound of element i of Stats.Handling:
// 10^((i+1)/40) µs, forty to a decade (each 5.9% above the one before), so
// that 10 µs, 100 µs, 1 ms and 10 ms are bounds; the last is 100 ms.
func HandlingBound(i int) time.Duration { return handlingBounds[i] }

var handlingBounds = func() (b [HandlingBuckets]time.Duration) {
	for i := range b {
		b[i] = time.Duration(math.Round(float64(time.Microsecond) * math.Pow(10, float64(i+1)/handlingPerDecade)))
	}
	return b
}()

// HandlingPercentile is the bound of the element of a Handling histogram
// that holds its p-th percentile request (nearest rank): at most 5.9% over
// the time itself. 0 for an empty histogram.
func HandlingPercentile(h [HandlingBuckets]uint64, p float64) time.Duration {
	var total uint64
	for _, n := range h {
		total += n
	}
	rank := uint64(math.Ceil(p / 100 * float64(total)))
	var seen uint64
	for i, n := range h {
		if seen += n; n > 0 && seen >= rank {
			return HandlingBound(i)
		}
	}
	return 0
}

type counters struct {
	received, notAllowed, truncated, badLength, badVersion, badHeader, unknownType, undecodable,
	retransmissions, unmatchedResponses, overload, panics atomic.Uint64
	handling [HandlingBuckets]atomic.Uint64
	// handlingNanos is the sum of the times in handling.
	handlingNanos atomic.Uint64
}

// handled counts a request answered d after it was read.
func (c *counters) handled(d time.Duration) {
	i, _ := slices.BinarySearch(handlingBounds[:], d)
	c.handling[min(i, HandlingBuckets-1)].Add(1)
	c.handlingNanos.Add(uint64(max(d, 0)))
}

func (c *counters) snapshot() Stats {
	var handling [HandlingBuckets]uint64
	for i := range handling {
		handling[i] = c.handling[i].Load()
	}
	return Stats{
		Received:           c.received.Load(),
		NotAllowed:         c.notAllowed.Load(),
		Truncated:          c.truncated.Load(),
		BadLength:          c.badLength.Load(),
		BadVersion:         c.badVersion.Load(),
		BadHeader:          c.badHeader.Load(),
		UnknownType:        c.unknownType.Load(),
		Undecodable:        c.undecodable.Load(),
		Retransmissions:    c.retransmissions.Load(),
		UnmatchedResponses: c.unmatchedResponses.Load(),
		Overload:           c.overload.Load(),
		Panics:             c.panics.Load(),
		Handling:           handling,
	}
}

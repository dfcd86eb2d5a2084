package pfcp

import "sync/atomic"

// Stats counts the datagrams the server received and what it could not or
// would not serve, by reason.
type Stats struct {
	Received uint64 // datagrams

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
}

type counters struct {
	received, truncated, badLength, badVersion, badHeader, unknownType, undecodable,
	retransmissions, unmatchedResponses, overload, panics atomic.Uint64
}

func (c *counters) snapshot() Stats {
	return Stats{
		Received:           c.received.Load(),
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
	}
}

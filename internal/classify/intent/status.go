package intent

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/xdp5g/xdp5g/internal/classify/classifyxdp"
)

// Stats are an intent's live figures.
type Stats struct {
	Packets uint64 `json:"packets"` // of its flows, local and offloaded
	Bytes   uint64 `json:"bytes"`
	// Over the interval between the last two samples (Sample).
	PacketRate float64 `json:"packetRate"`
	BitRate    float64 `json:"bitRate"`
	// Offloaded are the packets its flows sent to alternative nodes.
	Offloaded      uint64  `json:"offloaded"`
	OffloadedShare float64 `json:"offloadedShare"`
	// QueueDrops are the packets the queues of its CPUs dropped, whoever
	// sent them; Policed those of its flows its rate dropped.
	QueueDrops uint64 `json:"queueDrops"`
	Policed    uint64 `json:"policed"`
}

// Status is an installed intent as the REST API shows it.
type Status struct {
	ID       uint32          `json:"id"`
	Action   string          `json:"action"`
	Document json.RawMessage `json:"intent"`
	Rule     uint32          `json:"rule,omitempty"`
	Slice    *uint32         `json:"slice,omitempty"`
	CPUs     []int           `json:"cpus,omitempty"`
	FlowHash string          `json:"flowHash,omitempty"`
	Stats    Stats           `json:"stats"`
}

// List is every installed intent with its statistics, by ID.
func (s *Store) List() ([]Status, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []Status{}
	for _, id := range slices.Sorted(maps.Keys(s.intents)) {
		st, err := s.status(s.intents[id])
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

// Get is an installed intent with its statistics.
func (s *Store) Get(id uint32) (Status, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.intents[id]
	if !ok {
		return Status{}, fmt.Errorf("%w %d", ErrNoIntent, id)
	}
	return s.status(in)
}

// Sample takes every intent's counters, for the rates of the interval
// since the previous sample.
func (s *Store) Sample(now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, in := range s.intents {
		st, err := s.stats(in)
		if err != nil {
			return err
		}
		r := rate{at: now, packets: st.Packets, bytes: st.Bytes}
		if prev, ok := s.rates[id]; ok && now.After(prev.at) {
			dt := now.Sub(prev.at).Seconds()
			r.packetRate = float64(st.Packets-prev.packets) / dt
			r.bitRate = 8 * float64(st.Bytes-prev.bytes) / dt
		}
		s.rates[id] = r
	}
	return nil
}

func (s *Store) status(in *Intent) (Status, error) {
	st := Status{ID: in.ID, Action: in.Kind, Document: in.Document, Rule: in.Rule, CPUs: in.CPUs}
	if in.Slice != nil {
		st.Slice = &in.Slice.ID
	}
	if in.FlowHash != nil {
		st.FlowHash = fmt.Sprintf("%08X", *in.FlowHash)
	}
	var err error
	st.Stats, err = s.stats(in)
	return st, err
}

// stats reads an intent's counters: its rule's, or its prioritised flow's.
func (s *Store) stats(in *Intent) (st Stats, err error) {
	r := s.rates[in.ID]
	st.PacketRate, st.BitRate = r.packetRate, r.bitRate
	switch {
	case in.Rule != 0:
		if st.Packets, st.Bytes, err = s.dp.Counters(in.Rule); err != nil {
			return st, err
		}
		sl, err := s.dp.SliceStats(*in.Slice)
		if err != nil {
			return st, err
		}
		st.Offloaded, st.Policed, st.QueueDrops = sl.Offloaded.Packets, sl.Policed.Packets, sl.QueueDrops
	case in.FlowHash != nil:
		flows, err := s.dp.PrioFlows()
		if err != nil {
			return st, err
		}
		for _, f := range flows {
			if f.Hash == *in.FlowHash {
				st.Packets, st.Bytes = f.Packets, f.Bytes
			}
		}
		// Its CPU's queue: a slice of one CPU as far as drops go.
		sl, err := s.dp.SliceStats(classifyxdp.Slice{CPUs: in.CPUs})
		if err != nil {
			return st, err
		}
		st.QueueDrops = sl.QueueDrops
	}
	if st.Packets > 0 {
		st.OffloadedShare = float64(st.Offloaded) / float64(st.Packets)
	}
	return st, nil
}

package intent

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/xdp5g/xdp5g/internal/classify/classifyxdp"
	"github.com/xdp5g/xdp5g/internal/fielderr"
)

// Store is the installed intents over a classifier. It is safe for
// concurrent use.
type Store struct {
	dp      *classifyxdp.Datapath
	iface   func(string) (*net.Interface, error)
	changed func()

	mu      sync.Mutex
	intents map[uint32]*Intent
	rates   map[uint32]rate
}

// rate is an intent's counters at the last sample, and its rates over
// the interval before it.
type rate struct {
	at                  time.Time
	packets, bytes      uint64
	packetRate, bitRate float64
}

// NewStore keeps intents over a classifier. iface finds an interface of
// the classifier's namespace by name; changed, if set, is called after
// every change.
func NewStore(dp *classifyxdp.Datapath, iface func(string) (*net.Interface, error), changed func()) *Store {
	return &Store{dp: dp, iface: iface, changed: changed, intents: map[uint32]*Intent{}, rates: map[uint32]rate{}}
}

// Apply carries out an intent document: INSERT installs it (all or
// nothing), DELETE removes the installed intent of the same action and
// resources. It returns that intent.
func (s *Store) Apply(data []byte) (in Intent, deleted bool, err error) {
	return s.apply(data, false, nil)
}

// apply is Apply; restoring, it takes an intent of the action and
// resources of another too, as earlier versions saved such, and gives an
// intent the slice it had (had, by intent ID) when no slice has it.
func (s *Store) apply(data []byte, restoring bool, had map[uint32]uint32) (in Intent, deleted bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	doc, in, err := parse(data, s.iface)
	if err != nil {
		return in, false, err
	}
	if doc.Action["actionType"] == "DELETE" {
		for _, id := range slices.Sorted(maps.Keys(s.intents)) {
			if old := s.intents[id]; old.Kind == in.Kind && old.resources == in.resources {
				return *old, true, s.remove(id)
			}
		}
		return in, true, fmt.Errorf("%w with action %s and these resources", ErrNoIntent, in.Kind)
	}
	// A flow is prioritised once: the second intent's would take the
	// first's over, and the removal of either end the other's. An action
	// on the same resources is taken once too: a DELETE names the intent
	// by them.
	for _, id := range slices.Sorted(maps.Keys(s.intents)) {
		old := s.intents[id]
		if old.FlowHash != nil && in.FlowHash != nil && *old.FlowHash == *in.FlowHash {
			return in, false, invalid("Action.flow_hash", "flow %08X is prioritised by intent %d", *old.FlowHash, id)
		}
		if !restoring && len(in.Matches) > 0 && old.Kind == in.Kind && old.resources == in.resources {
			return in, false, invalid("Resources", "intent %d takes action %s on these resources", id, in.Kind)
		}
	}
	if doc.ID != nil {
		if _, taken := s.intents[*doc.ID]; taken || *doc.ID == 0 {
			return in, false, invalid("intentId", "intent %d exists, or is 0", *doc.ID)
		}
		in.ID = *doc.ID
	} else {
		for in.ID = 1; s.intents[in.ID] != nil; in.ID++ {
		}
	}
	doc.ID = &in.ID
	if in.Document, err = json.Marshal(doc); err != nil {
		return in, false, err
	}
	if err := s.install(&in, had); err != nil {
		return in, false, err
	}
	s.intents[in.ID] = &in
	s.notify()
	return in, false, nil
}

// install puts what an intent asks for into the classifier, all or none;
// its slice is the one it had, when free.
func (s *Store) install(in *Intent, had map[uint32]uint32) (err error) {
	var undo []func() error
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				err = errors.Join(err, undo[i]())
			}
		}
	}()
	if len(in.Matches) > 0 {
		id, err := s.freeSlice(had, in.ID)
		if err != nil {
			return err
		}
		slice := classifyxdp.Slice{ID: id, CPUs: in.CPUs, Prioritised: in.Prioritised, Rate: in.Rate}
		if err := s.dp.SetSlice(slice); err != nil {
			return asError(sliceField(in.Kind, err), err)
		}
		undo = append(undo, func() error { return s.dp.DeleteSlice(id) })
		priority := uint32(slicePriority)
		if in.Kind == PrioQueue {
			priority = prioQueuePriority
		}
		rule := classifyxdp.Rule{ID: ruleIDBase + in.ID, Priority: priority, Action: classifyxdp.ActionSteer, Slice: id, Matches: in.Matches}
		if err := s.dp.Add(rule); err != nil {
			return asError("Resources", err)
		}
		undo = append(undo, func() error { return s.dp.Delete(rule.ID) })
		in.Rule, in.Slice = rule.ID, &slice
	}
	if in.FlowHash != nil {
		if err := s.dp.SetPrioFlow(classifyxdp.PrioFlow{Hash: *in.FlowHash, CPU: in.CPUs[0]}); err != nil {
			return asError("Action.rx_queue", err)
		}
		undo = append(undo, func() error { return s.dp.DeletePrioFlow(*in.FlowHash) })
	}
	if in.Alternative != nil {
		return s.setAlternatives(in)
	}
	return nil
}

// asError names the part of the document a refusal of the classifier is
// about.
func asError(field string, err error) error {
	var re *fielderr.Error
	if errors.As(err, &re) {
		return invalid(field, "%s", re.Reason)
	}
	return err
}

// sliceField is the field of the Action a refusal of its slice is about.
func sliceField(kind string, err error) string {
	var re *fielderr.Error
	switch {
	case !errors.As(err, &re):
	case strings.HasPrefix(re.Field, "cpus") && kind == PrioQueue:
		return "Action.rx_queue"
	case strings.HasPrefix(re.Field, "cpus"):
		return "Action.cpus"
	}
	return "Action"
}

// freeSlice is the slice ID intent takes: the one it had before a restart
// when no slice has it, so that a slice's ID (its label in the metrics and
// reports) stays its intent's; else the highest slice ID no slice has:
// the intents take them from the top, out of the way of slices set by
// hand.
func (s *Store) freeSlice(had map[uint32]uint32, intent uint32) (uint32, error) {
	taken := map[uint32]bool{}
	for _, sl := range s.dp.Slices() {
		taken[sl.ID] = true
	}
	if id, ok := had[intent]; ok && !taken[id] && id < s.dp.SliceCapacity() {
		return id, nil
	}
	for id := s.dp.SliceCapacity(); id > 0; id-- {
		if !taken[id-1] {
			return id - 1, nil
		}
	}
	return 0, invalid("Action", "every slice is taken")
}

// setAlternatives gives the classifier the alternative nodes of the
// OFFLOAD intents, in the order of their IDs, with extra among them.
func (s *Store) setAlternatives(extra *Intent) error {
	var alts []classifyxdp.Alternative
	for _, id := range slices.Sorted(maps.Keys(s.intents)) {
		if id == extra.ID {
			continue
		}
		if in := s.intents[id]; in.Alternative != nil {
			alts = append(alts, *in.Alternative)
		}
	}
	if extra.Alternative != nil {
		alts = append(alts, *extra.Alternative)
	}
	return asError("Action", s.dp.SetAlternatives(alts))
}

// Delete removes an installed intent and what it installed.
func (s *Store) Delete(id uint32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.remove(id)
}

func (s *Store) remove(id uint32) error {
	in, ok := s.intents[id]
	if !ok {
		return fmt.Errorf("%w %d", ErrNoIntent, id)
	}
	var errs []error
	if in.Rule != 0 {
		errs = append(errs, s.dp.Delete(in.Rule), s.dp.DeleteSlice(in.Slice.ID))
	}
	if in.FlowHash != nil {
		errs = append(errs, s.dp.DeletePrioFlow(*in.FlowHash))
	}
	delete(s.intents, id)
	delete(s.rates, id)
	if in.Alternative != nil {
		errs = append(errs, s.setAlternatives(&Intent{ID: id}))
	}
	s.notify()
	return errors.Join(errs...)
}

func (s *Store) notify() {
	if s.changed != nil {
		s.changed()
	}
}

// OwnsRule says whether a rule ID is an intent's: such rules are made,
// saved and removed with their intent, not on their own.
func OwnsRule(id uint32) bool { return id >= ruleIDBase }

// OwnsSlice says whether a slice is an intent's.
func (s *Store) OwnsSlice(id uint32) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, in := range s.intents {
		if in.Rule != 0 && in.Slice.ID == id {
			return true
		}
	}
	return false
}

// Marshal is the installed intents' documents, for Restore.
func (s *Store) Marshal() []json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []json.RawMessage{}
	for _, id := range slices.Sorted(maps.Keys(s.intents)) {
		out = append(out, s.intents[id].Document)
	}
	return out
}

// Slices is the slice each installed intent took, by intent ID, for
// Restore.
func (s *Store) Slices() map[uint32]uint32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[uint32]uint32{}
	for id, in := range s.intents {
		if in.Rule != 0 {
			out[id] = in.Slice.ID
		}
	}
	return out
}

// Restore installs intents Marshal returned, each in the slice Slices
// gave it (had) when free; an error names the intent.
func (s *Store) Restore(docs []json.RawMessage, had map[uint32]uint32) error {
	for i, doc := range docs {
		if _, _, err := s.apply(doc, true, had); err != nil {
			field := fmt.Sprintf("intents[%d]", i)
			var e *fielderr.Error
			if errors.As(err, &e) {
				return invalid(strings.TrimSuffix(field+"."+e.Field, "."), "%s", e.Reason)
			}
			return fmt.Errorf("%s: %w", field, err)
		}
	}
	return nil
}

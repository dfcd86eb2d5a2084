package classify

import (
	"errors"
	"fmt"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
)

// MaxRules is the number of rules the data path holds.
const MaxRules = 65536

// DefaultGrace is how long a half of the rules stays untouched after
// packets stop being sent to it: far longer than an XDP program runs.
const DefaultGrace = time.Millisecond

// Datapath is the classifier in XDP: its program, its maps and the rules
// written into them. The maps hold the Table twice; packets use the half
// the epoch names. A change is written to the other half, the epoch moves
// on (from then on packets see the change, whole), and once the packets
// that used the old half are through, the change is written there too. A
// Datapath is not safe for concurrent use.
type Datapath struct {
	objs      classifyObjects
	table     *Table
	grace     time.Duration
	epoch     uint32
	slots     map[uint32]uint32 // rule ID to its counter slot
	freeSlots []uint32
	nextSlot  uint32
	masks     map[Key]uint16 // mask to its slot in the halves
}

// OpenDatapath loads the classifier with a table of at most maxMasks masks
// (DefaultMaxMasks for 0, CLASSIFY_MAX_MASKS at most).
func OpenDatapath(maxMasks int) (*Datapath, error) {
	if maxMasks > len(classifyClassifyHalf{}.Masks) {
		return nil, fmt.Errorf("%d masks: the data path takes %d at most", maxMasks, len(classifyClassifyHalf{}.Masks))
	}
	d := &Datapath{table: NewTable(maxMasks), grace: DefaultGrace, slots: map[uint32]uint32{}, nextSlot: 1,
		masks: map[Key]uint16{}}
	if err := loadClassifyObjects(&d.objs, nil); err != nil {
		return nil, fmt.Errorf("loading the classifier: %w", err)
	}
	return d, nil
}

// Close unloads the classifier.
func (d *Datapath) Close() error { return d.objs.Close() }

// Program is the XDP program.
func (d *Datapath) Program() *ebpf.Program { return d.objs.XdpClassify }

// Len is the number of rules.
func (d *Datapath) Len() int { return d.table.Len() }

// Add installs a rule: once Add returns, every packet is classified with
// it. A refused rule (a *RuleError) changes nothing.
func (d *Datapath) Add(r Rule) error {
	switch r.Action {
	case ActionMirror, ActionRedirect, ActionSteer:
		return invalid("action", "the data path does not carry out action %d yet", r.Action)
	}
	if d.table.Len() >= MaxRules {
		return invalid("id", "the data path holds %d rules already", MaxRules)
	}
	if err := d.table.Add(r); err != nil {
		return err
	}
	e := d.table.rules[r.ID]
	slot, err := d.takeSlot()
	if err == nil {
		d.slots[r.ID] = slot
		err = d.commit(e.ternaries)
	}
	if err != nil {
		_ = d.table.Delete(r.ID)
		d.giveSlot(r.ID)
		return errors.Join(err, d.commit(e.ternaries))
	}
	return nil
}

// Delete removes a rule.
func (d *Datapath) Delete(id uint32) error {
	e, ok := d.table.rules[id]
	if !ok {
		return fmt.Errorf("no rule %d", id)
	}
	if err := d.table.Delete(id); err != nil {
		return err
	}
	err := d.commit(e.ternaries)
	d.giveSlot(id)
	return err
}

// Counters are the packets and bytes a rule matched.
func (d *Datapath) Counters(id uint32) (packets, bytes uint64, err error) {
	slot, ok := d.slots[id]
	if !ok {
		return 0, 0, fmt.Errorf("no rule %d", id)
	}
	var perCPU []classifyCounter
	if err := d.objs.ClassifyCounters.Lookup(slot, &perCPU); err != nil {
		return 0, 0, err
	}
	for _, c := range perCPU {
		packets += c.Packets
		bytes += c.Bytes
	}
	return packets, bytes, nil
}

// takeSlot hands out a counter slot with its counters at zero.
func (d *Datapath) takeSlot() (uint32, error) {
	var slot uint32
	if n := len(d.freeSlots); n > 0 {
		slot, d.freeSlots = d.freeSlots[n-1], d.freeSlots[:n-1]
	} else {
		slot = d.nextSlot
		d.nextSlot++
	}
	zero := make([]classifyCounter, ebpf.MustPossibleCPU())
	if err := d.objs.ClassifyCounters.Put(slot, zero); err != nil {
		d.freeSlots = append(d.freeSlots, slot)
		return 0, err
	}
	return slot, nil
}

func (d *Datapath) giveSlot(id uint32) {
	if slot, ok := d.slots[id]; ok {
		delete(d.slots, id)
		d.freeSlots = append(d.freeSlots, slot)
	}
}

// commit publishes the table as it now is for the ternaries a change
// touched: into the half packets do not use, then, after the switch and a
// grace period, into the other.
func (d *Datapath) commit(changed []ternary) error {
	gone := d.placeMasks()
	next := d.epoch + 1
	if err := d.write(next&1, changed, gone); err != nil {
		return err
	}
	if err := d.objs.ClassifyEpoch.Put(uint32(0), next); err != nil {
		return err
	}
	d.epoch = next
	time.Sleep(d.grace)
	return d.write(^next&1, changed, gone)
}

// placeMasks gives every mask of the table a slot, and returns the masks
// gone from the table with the slots they had, which no new mask takes in
// the same change: their entries go first.
func (d *Datapath) placeMasks() (gone map[Key]uint16) {
	gone = map[Key]uint16{}
	used := map[uint16]bool{}
	for mask, slot := range d.masks {
		used[slot] = true
		if d.table.group(mask) == nil {
			gone[mask] = slot
			delete(d.masks, mask)
		}
	}
	for _, g := range d.table.groups {
		if _, ok := d.masks[g.mask]; ok {
			continue
		}
		slot := uint16(0)
		for used[slot] {
			slot++
		}
		used[slot] = true
		d.masks[g.mask] = slot
	}
	return gone
}

// write brings one half up to the table for the changed ternaries: the
// entries first, then the masks that lead to them.
func (d *Datapath) write(half uint32, changed []ternary, gone map[Key]uint16) error {
	for _, t := range changed {
		slot, ok := d.masks[t.mask]
		if !ok {
			slot = gone[t.mask]
		}
		key := classifyClassifyEntryKey{Half: uint16(half), Mask: slot, Value: *rawKey(&t.value)}
		e := d.table.best(t.mask, t.value)
		if e == nil {
			if err := d.objs.ClassifyEntries.Delete(&key); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				return err
			}
			continue
		}
		v := classifyClassifyVerdict{Rule: d.slots[e.rule.ID], Priority: e.rule.Priority, Order: uint32(e.order),
			Action: uint8(e.rule.Action)}
		if err := d.objs.ClassifyEntries.Put(&key, &v); err != nil {
			return err
		}
	}
	var h classifyClassifyHalf
	for mask, slot := range d.masks {
		h.Masks[slot] = classifyClassifyMask{Mask: *rawKey(&mask), Used: 1}
	}
	return d.objs.ClassifyMasks.Put(half, &h)
}

// rawKey is a Key as the program's struct: the same octets.
func rawKey(k *Key) *classifyClassifyKey { return (*classifyClassifyKey)(unsafe.Pointer(k)) }

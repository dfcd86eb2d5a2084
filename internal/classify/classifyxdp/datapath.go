package classifyxdp

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/xdp5g/xdp5g/internal/fielderr"
	"github.com/xdp5g/xdp5g/internal/platform/percpu"
	"github.com/xdp5g/xdp5g/internal/platform/xdplink"
)

// MaxRules is the number of rules the data path holds.
const MaxRules = int(classifyClassifyLimitsCLASSIFY_MAX_RULES)

// ErrNoRule is returned for a rule ID the data path does not have.
var ErrNoRule = errors.New("no rule")

// DefaultGrace is how long a half of the rules stays untouched after
// packets stop being sent to it: far longer than an XDP program runs.
const DefaultGrace = time.Millisecond

// Datapath is the classifier in XDP: its program, its maps and the rules
// written into them. The maps hold the Table twice; packets use the half
// the epoch names. A change is written to the other half and the epoch
// moves on: from then on packets see the change, whole. The half left
// behind catches up at the next change, once the packets that used it are
// through. A Datapath is safe for concurrent use.
type Datapath struct {
	objs classifyObjects

	mu        sync.Mutex // over the rest
	table     *Table
	grace     time.Duration
	epoch     uint32
	switched  time.Time         // when the epoch last moved
	lagging   []placement       // what the half packets do not use lacks
	slots     map[uint32]uint32 // rule ID to its counter slot
	freeSlots []uint32
	cooling   []uint32 // slots of rules gone, until packets of the old half are through
	nextSlot  uint32
	masks     map[Key]uint16 // mask to its slot in the halves
	// deep are, per half, the entries written with more than one level
	// (struct classify_entry_key), and how many: the levels a shorter
	// list must delete. Every other entry has one level, or none.
	deep    [2]map[placedValue]uint32
	changed func() // Config.Changed
	slices  map[uint32]Slice
	// queueDrops attaches slice_queue_drops to the CPU map's tracepoint.
	queueDrops link.Link
}

// placement is a ternary where the halves hold it: its mask's slot.
type placement struct {
	ternary
	slot uint16
}

// placedValue is a masked value under its mask's slot: an entry of a half.
type placedValue struct {
	slot  uint16
	value Key
}

// Config sets up a Datapath.
type Config struct {
	// MaxMasks bounds the distinct masks of the rules: DefaultMaxMasks for
	// 0, MaxMasks at most.
	MaxMasks int
	// OrphanFragments is what becomes of a fragment whose first fragment
	// was not seen (so its verdict is unknown): ActionPass, the default,
	// or ActionDrop.
	OrphanFragments ActionKind
	// Changed, if set, is called after every change of the rules and the
	// slices, with the Datapath's lock held: it must not call the
	// Datapath.
	Changed func()
	// OffloadHold is how long a flow sent to an alternative node stays
	// away at least: DefaultOffloadHold for 0.
	OffloadHold time.Duration
	// Chain, if set, are the maps of the chains on the UPF's interfaces
	// (upfxdp.Datapath.ChainMaps), for the stages (Stages) to run in;
	// without it they run in none.
	Chain map[string]*ebpf.Map
}

// MaxMasks is the most distinct masks the data path takes.
const MaxMasks = len(classifyClassifyHalf{}.Masks)

// OpenDatapath loads the classifier.
func OpenDatapath(cfg Config) (*Datapath, error) {
	if cfg.MaxMasks > MaxMasks {
		return nil, fmt.Errorf("%d masks: the data path takes %d at most", cfg.MaxMasks, MaxMasks)
	}
	switch cfg.OrphanFragments {
	case 0:
		cfg.OrphanFragments = ActionPass
	case ActionPass, ActionDrop:
	default:
		return nil, fmt.Errorf("orphan fragments can be passed or dropped, not given action %d", cfg.OrphanFragments)
	}
	spec, err := loadClassify()
	if err != nil {
		return nil, err
	}
	var specs classifySpecs
	if err := spec.Assign(&specs); err != nil {
		return nil, err
	}
	if err := specs.OrphanFragmentAction.Set(uint8(cfg.OrphanFragments)); err != nil {
		return nil, err
	}
	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, err
	}
	specs.SliceCpus.MaxEntries = uint32(cpus)
	specs.CpuLoads.MaxEntries = uint32(cpus)
	if err := setBacklogs(&specs.classifyVariableSpecs, cfg.OffloadHold); err != nil {
		return nil, err
	}
	d := &Datapath{table: NewTable(cfg.MaxMasks), grace: DefaultGrace, slots: map[uint32]uint32{}, nextSlot: 1,
		masks: map[Key]uint16{}, slices: map[uint32]Slice{}, changed: cfg.Changed,
		deep: [2]map[placedValue]uint32{{}, {}}}
	opts := &ebpf.CollectionOptions{MapReplacements: cfg.Chain}
	for _, name := range chainMaps {
		if cfg.Chain[name] == nil {
			spec.Maps[name].Pinning = ebpf.PinNone // a chain of none: the classifier's own
		}
	}
	if err := spec.LoadAndAssign(&d.objs, opts); err != nil {
		return nil, fmt.Errorf("loading the classifier: %w", err)
	}
	if err := d.watchQueueDrops(); err != nil {
		return nil, errors.Join(err, d.objs.Close())
	}
	return d, nil
}

// Attach runs the classifier on an interface of the calling thread's
// namespace: the XDP program, and the mirror program at TC ingress, first,
// so that it is there for the first packet XDP marks. The links are pinned
// in dir; links a previous run pinned there get this Datapath's programs
// atomically, so a restart leaves no packet unclassified.
func (d *Datapath) Attach(dir, ifname string, mode xdplink.Mode) error {
	for _, sub := range []string{mirrorLinks, xdpLinks} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return err
		}
	}
	if err := xdplink.TCIngress(filepath.Join(dir, mirrorLinks, ifname), d.MirrorProgram(), ifname); err != nil {
		return err
	}
	return xdplink.XDP(filepath.Join(dir, xdpLinks, ifname), d.Program(), ifname, mode)
}

// Subdirectories of an Attach directory, and the pin of the queue-drop
// link (KeepCountingDrops).
const (
	xdpLinks    = "xdp"
	mirrorLinks = "tc-mirror"
	dropsLink   = "queue-drops"
)

// KeepCountingDrops pins the link that counts what the CPU queues drop in
// dir, in place of a previous run's: the programs a daemon leaves attached
// then keep their queues' fill exact while it is down.
func (d *Datapath) KeepCountingDrops(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := StopCountingDrops(dir); err != nil {
		return err
	}
	return d.queueDrops.Pin(filepath.Join(dir, dropsLink))
}

// StopCountingDrops removes the queue-drop link pinned in dir, if any.
func StopCountingDrops(dir string) error {
	pin := filepath.Join(dir, dropsLink)
	if _, err := os.Stat(pin); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return xdplink.Detach(pin)
}

// Detach removes the classifier from an interface it was attached to with
// links pinned in dir.
func Detach(dir, ifname string) error {
	return errors.Join(xdplink.Detach(filepath.Join(dir, xdpLinks, ifname)),
		xdplink.Detach(filepath.Join(dir, mirrorLinks, ifname)))
}

// DetachAll removes every attachment pinned in dir.
func DetachAll(dir string) error {
	return errors.Join(xdplink.DetachAll(filepath.Join(dir, xdpLinks)), xdplink.DetachAll(filepath.Join(dir, mirrorLinks)),
		StopCountingDrops(dir))
}

// Attached names the interfaces with the classifier's XDP link pinned in
// dir.
func Attached(dir string) ([]string, error) {
	return xdplink.Pinned(filepath.Join(dir, xdpLinks))
}

// Close unloads the classifier.
func (d *Datapath) Close() error { return errors.Join(d.queueDrops.Close(), d.objs.Close()) }

// Program is the XDP program.
func (d *Datapath) Program() *ebpf.Program { return d.objs.XdpClassify }

// chainMaps are the maps of bpf/lib/chain.h.
var chainMaps = []string{classifyMapChainStages, classifyMapChainCpuStages, classifyMapChainIfaces,
	classifyMapChainHandoffs}

// Stages are the classifier's stages of a chain: the classify stage, and
// the steer stage behind it and first in a chain.
func (d *Datapath) Stages() (classify, steer, steerFirst *ebpf.Program) {
	return d.objs.XdpClassifyStage, d.objs.XdpSteerStage, d.objs.XdpSteerEntry
}

// MirrorProgram is the TC ingress program that sends the copies of the
// packets that mirroring rules match: it goes on every interface that runs
// Program.
func (d *Datapath) MirrorProgram() *ebpf.Program { return d.objs.TcClassifyMirror }

// Len is the number of rules.
func (d *Datapath) Len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.table.Len()
}

// Rules are the rules, by ID.
func (d *Datapath) Rules() []Rule {
	return d.rules(func(a, b *entry) int { return cmp.Compare(a.rule.ID, b.rule.ID) })
}

// RulesAsAdded are the rules in the order they were added, which decides
// between equal priorities: the order to add them in again.
func (d *Datapath) RulesAsAdded() []Rule {
	return d.rules(func(a, b *entry) int { return cmp.Compare(a.order, b.order) })
}

func (d *Datapath) rules(by func(a, b *entry) int) []Rule {
	d.mu.Lock()
	defer d.mu.Unlock()
	entries := slices.SortedFunc(maps.Values(d.table.rules), by)
	out := make([]Rule, len(entries))
	for i, e := range entries {
		out[i] = e.rule
	}
	return out
}

// Rule is the rule with an ID.
func (d *Datapath) Rule(id uint32) (Rule, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.table.rules[id]
	if !ok {
		return Rule{}, false
	}
	return e.rule, true
}

// Add installs rules, all or none: once Add returns, every packet is
// classified with them. A refused rule (a *fielderr.Error, with its place in
// the list) changes nothing.
func (d *Datapath) Add(rules ...Rule) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.table.Len()+len(rules) > MaxRules {
		return invalid("rules", "the data path holds %d rules at most", MaxRules)
	}
	var changed []ternary
	undo := func(added []Rule) {
		for _, r := range added {
			_ = d.table.Delete(r.ID)
			d.giveSlot(r.ID)
		}
	}
	for i, r := range rules {
		err := d.checkSteer(r)
		if err == nil {
			err = d.table.Add(r)
		}
		if err == nil {
			var slot uint32
			if slot, err = d.takeSlot(); err == nil {
				d.slots[r.ID] = slot
				err = d.setEgress(slot, r)
			}
			if err != nil {
				undo(rules[i : i+1])
			}
		}
		if err != nil {
			undo(rules[:i])
			var re *fielderr.Error
			if len(rules) > 1 && errors.As(err, &re) {
				re.Field = fmt.Sprintf("rules[%d].%s", i, re.Field)
			}
			return err
		}
		changed = append(changed, d.table.rules[r.ID].ternaries...)
	}
	if err := d.commit(changed); err != nil {
		undo(rules)
		return errors.Join(err, d.commit(changed))
	}
	return nil
}

// setEgress writes where a redirecting, mirroring or steering rule's slot
// sends packets; nothing for the other rules.
func (d *Datapath) setEgress(slot uint32, r Rule) error {
	var out classifyClassifyEgress
	switch {
	case r.Out != nil:
		out = classifyClassifyEgress{Ifindex: uint32(r.Out.Ifindex), Dst: [6]byte(r.Out.DstMAC), Src: [6]byte(r.Out.SrcMAC)}
	case r.Action == ActionSteer:
		out.Slice = r.Slice
	default:
		return nil
	}
	return d.objs.ClassifyTargets.Put(slot, out)
}

// Delete removes rules, all or none.
func (d *Datapath) Delete(ids ...uint32) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, id := range ids {
		if _, ok := d.table.rules[id]; !ok {
			return fmt.Errorf("%w %d", ErrNoRule, id)
		}
	}
	return d.remove(ids)
}

// Clear removes every rule.
func (d *Datapath) Clear() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.remove(slices.Collect(maps.Keys(d.table.rules)))
}

// remove takes rules the table has out of it and the data path; their
// counter slots cool from the switch on.
func (d *Datapath) remove(ids []uint32) error {
	var changed []ternary
	for _, id := range ids {
		if e, ok := d.table.rules[id]; ok { // an ID given twice is there once
			changed = append(changed, e.ternaries...)
			_ = d.table.Delete(id)
		}
	}
	err := d.commit(changed)
	for _, id := range ids {
		d.giveSlot(id)
	}
	return err
}

// Counters are the packets and bytes a rule matched.
func (d *Datapath) Counters(id uint32) (packets, bytes uint64, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	slot, ok := d.slots[id]
	if !ok {
		return 0, 0, fmt.Errorf("%w %d", ErrNoRule, id)
	}
	c, err := percpu.Sum[Counter](d.objs.ClassifyCounters, slot)
	return c.Packets, c.Bytes, err
}

// takeSlot hands out a counter slot with its counters at zero.
func (d *Datapath) takeSlot() (uint32, error) {
	if len(d.freeSlots) == 0 && d.nextSlot > uint32(MaxRules) {
		d.cool() // every slot used: those of rules gone must do
	}
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
		d.cooling = append(d.cooling, slot)
	}
}

// commit publishes the table as it now is for the ternaries a change
// touched, into the half packets do not use (brought up to date first with
// the previous change, once its grace period is over), and switches
// packets to it.
func (d *Datapath) commit(changed []ternary) error {
	gone := d.placeMasks()
	placed := make([]placement, len(changed))
	for i, t := range changed {
		slot, ok := d.masks[t.mask]
		if !ok {
			slot = gone[t.mask]
		}
		placed[i] = placement{t, slot}
	}
	next := d.epoch + 1
	d.cool()
	if err := d.write(next&1, d.lagging); err != nil {
		return err
	}
	if err := d.write(next&1, placed); err != nil {
		return err
	}
	if err := d.objs.ClassifyEpoch.Put(uint32(0), next); err != nil {
		return err
	}
	d.epoch, d.switched, d.lagging = next, time.Now(), placed
	d.notify()
	return nil
}

// notify calls Config.Changed, if set.
func (d *Datapath) notify() {
	if d.changed != nil {
		d.changed()
	}
}

// cool waits until the packets that used the half left behind at the last
// switch are through: its entries may change, and the counter slots of
// rules gone be given again.
func (d *Datapath) cool() {
	time.Sleep(time.Until(d.switched.Add(d.grace)))
	d.freeSlots, d.cooling = append(d.freeSlots, d.cooling...), nil
}

// placeMasks gives every mask of the table a slot, and returns the masks
// gone from the table with the slots they had. No new mask takes those, nor
// the slots the lagging half may still hold entries under.
func (d *Datapath) placeMasks() (gone map[Key]uint16) {
	gone = map[Key]uint16{}
	used := map[uint16]bool{}
	for _, p := range d.lagging {
		used[p.slot] = true
	}
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

// write brings one half up to the table for the placed ternaries: the
// entries first, then the masks that lead to them. An entry's levels are
// its rules, best first, down to the first that decides a packet (not
// count nor mirror, which hand it on), maxChain at most; the levels
// beyond go, and so does every level of an entry whose mask is gone or
// has another slot now.
func (d *Datapath) write(half uint32, placed []placement) error {
	for _, p := range placed {
		key := classifyClassifyEntryKey{Half: uint16(half), Mask: p.slot, Value: *rawKey(&p.value)}
		var list []*entry
		if slot, ok := d.masks[p.mask]; ok && slot == p.slot {
			list = d.table.rulesOf(p.mask, p.value)
		}
		for i, e := range list {
			if i == maxChain {
				break
			}
			key.Level = uint32(i)
			v := classifyClassifyVerdict{Rule: d.slots[e.rule.ID], Priority: e.rule.Priority, Order: uint32(e.order),
				Action: uint8(e.rule.Action)}
			if err := d.objs.ClassifyEntries.Put(&key, &v); err != nil {
				return fmt.Errorf("writing a rule's entry: the data path holds %d entries (masked values and the levels below count and mirror rules) per half: %w",
					d.objs.ClassifyEntries.MaxEntries()/2, err)
			}
			key.Level++
			if !e.rule.Action.handsOn() {
				break
			}
		}
		written, at := key.Level, placedValue{p.slot, p.value}
		had, ok := d.deep[half][at]
		if !ok {
			// One level at most: the one just written, or one to delete
			// when the list is empty now.
			had = max(written, 1)
		}
		for ; key.Level < had; key.Level++ {
			if err := d.objs.ClassifyEntries.Delete(&key); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				return err
			}
		}
		if written > 1 {
			d.deep[half][at] = written
		} else {
			delete(d.deep[half], at)
		}
	}
	var h classifyClassifyHalf
	for mask, slot := range d.masks {
		h.Masks[slot] = classifyClassifyMask{Mask: *rawKey(&mask), MaxPriority: d.table.group(mask).maxPriority()}
		h.Order[h.N] = uint8(slot)
		h.N++
	}
	slices.SortFunc(h.Order[:h.N], func(a, b uint8) int {
		return cmp.Or(cmp.Compare(h.Masks[b].MaxPriority, h.Masks[a].MaxPriority), cmp.Compare(a, b))
	})
	return d.objs.ClassifyMasks.Put(half, &h)
}

// rawKey is a Key as the program's struct: the same octets.
func rawKey(k *Key) *classifyClassifyKey { return (*classifyClassifyKey)(unsafe.Pointer(k)) }

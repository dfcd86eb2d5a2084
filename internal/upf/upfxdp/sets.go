package upfxdp

import (
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// setKey names a PDR set: an uplink TEID or a downlink UE address, each in
// the byte order the packet carries it.
type setKey struct {
	kind upfSetKind
	key  uint64
}

func (k setKey) overflowKey() upfSetKey { return upfSetKey{Key: k.key, Kind: uint32(k.kind)} }

// Constants of the set tables (enum set_hash, enum limits).
const (
	setHash = uint64(upfSetHashSET_HASH_HI)<<32 | uint64(upfSetHashSET_HASH_LO)
	setWays = int(upfLimitsSET_WAYS)
	// setsPerSession sizes pdr_sets: a TEID and one or two UE addresses.
	setsPerSession = 3
	// spareSets lets a full table still replace a set, which writes the new
	// one before it frees the old.
	spareSets = 64
	noPlace   = -1 // the set lives in set_overflow
)

// place is where a key's set is published.
type place struct {
	index int    // place in set_index (bucket × setWays + way), or noPlace
	slot  uint32 // slot in pdr_sets
}

// pdrSets keeps the sets the packet finds its PDRs by (bpf/upf/maps.h):
// pdr_sets and set_index are mmapped and written directly, set_overflow
// holds keys of full buckets only (a key whose bucket is full goes there,
// and moves into the first place its bucket frees), so that the packet of
// a key not installed looks into it only when its bucket is full. A set is
// never rewritten while published: a new slot is written, then published,
// then the old slot freed, so a packet reads either the old set or the new
// one. A key's record (records.go) follows its set: written after the set
// is published, taken away before it is withdrawn.
type pdrSets struct {
	mu       sync.RWMutex // readers (get, each, keys) share it
	sets     mapped[PDRSet]
	index    []byte // set_index: setWays native-endian u32 places per bucket
	bits     uint   // of a bucket number
	slotBits uint   // of a place, the slot's; the key's tag is above them
	overflow *ebpf.Map
	// overflowed are the keys in set_overflow by bucket.
	overflowed map[int][]setKey
	where      map[setKey]place
	free       []uint32 // free slots, least recently freed first
	maxKeys    int
	pdrs       mapped[PDR]    // what the records copy
	sdfSets    mapped[SDFSet] // the filters records hold (record_branch)
	records    records
	// unrecorded are the keys put to take no record (PutUnrecordedUplink).
	unrecorded map[setKey]bool
}

// indexBits sizes set_index to a bucket per set: places for twice the sets.
func indexBits(sets uint32) uint { return uint(bits.Len32(sets - 1)) }

func (p *pdrSets) open(m *upfMaps, pdrs mapped[PDR], sdfSets mapped[SDFSet]) (err error) {
	if p.sets, err = mapArray[PDRSet](m.PdrSets); err != nil {
		return err
	}
	p.pdrs, p.sdfSets = pdrs, sdfSets
	if err := p.records.open(m, pdrs.len()); err != nil {
		return err
	}
	if p.index, err = mmap(m.SetIndex); err != nil {
		return err
	}
	p.bits = uint(bits.Len32(m.SetIndex.MaxEntries() - 1))
	p.slotBits = uint(bits.Len32(m.PdrSets.MaxEntries() - 1))
	p.overflow = m.SetOverflow
	p.maxKeys = int(m.PdrSets.MaxEntries()) - 1 - spareSets
	p.where, p.unrecorded = map[setKey]place{}, map[setKey]bool{}
	p.overflowed = map[int][]setKey{}
	// A restarted daemon finds the sets published: take them from the
	// index and the overflow, and free every slot nothing publishes.
	used := make([]bool, m.PdrSets.MaxEntries())
	used[0] = true
	for pos := range p.places() {
		placed := p.loadIndex(pos)
		if placed == 0 {
			continue
		}
		slot := placed & (1<<p.slotBits - 1)
		if k, ok := p.owner(slot, used); ok && p.isPlaceOf(k, pos) {
			used[slot] = true
			p.where[k] = place{pos, slot}
			p.storeIndex(pos, p.placed(k, slot)) // tagged as this build tags
		} else {
			p.storeIndex(pos, 0) // not written by us: unpublish
		}
	}
	var k upfSetKey
	var slot uint32
	var stray []upfSetKey
	it := m.SetOverflow.Iterate()
	for it.Next(&k, &slot) {
		if owner, ok := p.owner(slot, used); ok && owner == (setKey{upfSetKind(k.Kind), k.Key}) {
			used[slot] = true
			p.where[owner] = place{noPlace, slot}
			p.overflowed[p.bucket(owner)] = append(p.overflowed[p.bucket(owner)], owner)
		} else {
			stray = append(stray, k)
		}
	}
	if err := it.Err(); err != nil {
		return err
	}
	for _, k := range stray {
		if err := ignoreMissing(m.SetOverflow.Delete(k)); err != nil {
			return err
		}
	}
	// A previous run may have left keys in set_overflow whose buckets
	// have room since: move them in.
	for bucket := range p.overflowed {
		for way := range setWays {
			if pos := bucket*setWays + way; p.loadIndex(pos) == 0 {
				if err := p.fill(pos); err != nil {
					return err
				}
			}
		}
	}
	for slot, u := range used {
		if !u {
			p.free = append(p.free, uint32(slot))
		}
	}
	p.rebuildRecords(used)
	return nil
}

// owner is the key of the set in slot, unless the slot is out of range,
// taken already, or holds the set of a key seen already.
func (p *pdrSets) owner(slot uint32, used []bool) (setKey, bool) {
	if int(slot) >= len(used) || used[slot] {
		return setKey{}, false
	}
	set := p.set(slot)
	k := setKey{upfSetKind(set.Kind), set.Key}
	_, dup := p.where[k]
	return k, !dup
}

func (p *pdrSets) close() error {
	err := errors.Join(p.sets.close(), p.records.close())
	if p.index != nil {
		err = errors.Join(err, unix.Munmap(p.index))
	}
	return err
}

// hash is k's hash, computed as find_set does.
func hash(k setKey) uint64 {
	h := (k.key + uint64(k.kind)<<56) * setHash
	return (h ^ h>>32) * setHash
}

// bucket is a key's bucket in set_index.
func (p *pdrSets) bucket(k setKey) int { return int(hash(k) >> (64 - p.bits)) }

// placed is what a place holds for k's set in slot: k's tag, the top bits
// of the 32 bits of its hash below the bucket's, over the slot.
func (p *pdrSets) placed(k setKey, slot uint32) uint32 {
	below := uint32(hash(k) << p.bits >> 32)
	return below>>p.slotBits<<p.slotBits | slot
}

// places is the number of places in set_index.
func (p *pdrSets) places() int { return len(p.index) / 4 }

func (p *pdrSets) isPlaceOf(k setKey, pos int) bool { return pos/setWays == p.bucket(k) }

// placeFor is the first of k's places that is free or k's own (own is
// where k is published now, or noPlace), or noPlace when all are taken.
func (p *pdrSets) placeFor(k setKey, own int) int {
	for way := range setWays {
		if pos := p.bucket(k)*setWays + way; pos == own || p.loadIndex(pos) == 0 {
			return pos
		}
	}
	return noPlace
}

func (p *pdrSets) set(slot uint32) *PDRSet { return p.sets.at(slot) }

func (p *pdrSets) loadIndex(pos int) uint32 {
	return atomic.LoadUint32((*uint32)(unsafe.Pointer(&p.index[4*pos])))
}

// storeIndex publishes (placed) or withdraws (0) a set in one aligned
// store, ordered after the writes of the set it publishes.
func (p *pdrSets) storeIndex(pos int, placed uint32) {
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&p.index[4*pos])), placed)
}

// put publishes set under k, replacing what k had; k takes a record
// unless recorded is false.
func (p *pdrSets) put(k setKey, set PDRSet, recorded bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	old, had := p.where[k]
	if !had && len(p.where) >= p.maxKeys {
		return fmt.Errorf("all %d PDR sets are in use", p.maxKeys)
	}
	if len(p.free) == 0 {
		return errors.New("no free PDR set slot")
	}
	slot := p.free[0]
	set.Key, set.Kind = k.key, uint32(k.kind)
	*p.set(slot) = set

	own := noPlace
	if had {
		own = old.index
	}
	pos := p.placeFor(k, own)
	if pos == noPlace {
		if err := p.overflow.Put(k.overflowKey(), slot); err != nil {
			return fmt.Errorf("PDR set overflow: %w", err)
		}
		if !had {
			b := p.bucket(k)
			p.overflowed[b] = append(p.overflowed[b], k)
		}
	} else {
		p.storeIndex(pos, p.placed(k, slot))
	}
	p.free = p.free[1:]
	p.where[k] = place{pos, slot}
	if had {
		// The new set is published: take the old one's place away unless
		// the new one took it over (same index place, or both in the
		// overflow, where Put replaced it). An overflow entry left behind
		// would be harmless, the index being read first.
		if old.index != pos {
			_ = p.unpublish(k, old)
		}
		p.free = append(p.free, old.slot)
	}
	if recorded {
		delete(p.unrecorded, k)
	} else {
		p.unrecorded[k] = true
	}
	p.keepRecord(k)
	return nil
}

// unpublish takes k's set at its place out of the overflow, or out of the
// index (fill).
func (p *pdrSets) unpublish(k setKey, at place) error {
	if at.index == noPlace {
		b := p.bucket(k)
		p.overflowed[b] = slices.DeleteFunc(p.overflowed[b], func(o setKey) bool { return o == k })
		if len(p.overflowed[b]) == 0 {
			delete(p.overflowed, b)
		}
		return ignoreMissing(p.overflow.Delete(k.overflowKey()))
	}
	return p.fill(at.index)
}

// fill gives the place at pos, which its key leaves or has left, to a key
// of its bucket waiting in the overflow, or empties it when none waits.
func (p *pdrSets) fill(pos int) error {
	waiting := p.overflowed[pos/setWays]
	if len(waiting) == 0 {
		p.storeIndex(pos, 0)
		return nil
	}
	// Found in the index before it leaves the overflow.
	moved := waiting[len(waiting)-1]
	slot := p.where[moved].slot
	p.storeIndex(pos, p.placed(moved, slot))
	p.where[moved] = place{pos, slot}
	return p.unpublish(moved, place{noPlace, slot})
}

// delete unpublishes k; a missing key is not an error.
func (p *pdrSets) delete(k setKey) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	old, had := p.where[k]
	if !had {
		return nil
	}
	delete(p.where, k)
	p.keepRecord(k) // takes it away
	if err := p.unpublish(k, old); err != nil {
		p.where[k] = old
		p.keepRecord(k)
		return err
	}
	delete(p.unrecorded, k)
	p.free = append(p.free, old.slot)
	return nil
}

// get is k's set, looked up first as the packet does, in k's bucket of
// set_index: a restore looks up millions of keys, and the bucket and the
// set are two cache lines where p.where takes more.
func (p *pdrSets) get(k setKey) (PDRSet, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	slot, ok := p.indexed(k)
	if !ok {
		at, ok := p.where[k]
		if !ok {
			return PDRSet{}, ebpf.ErrKeyNotExist
		}
		slot = at.slot
	}
	set := *p.set(slot)
	set.Key, set.Kind = 0, 0 // the caller's view: which PDRs
	return set, nil
}

// indexed is the slot of k's set if set_index publishes it.
func (p *pdrSets) indexed(k setKey) (uint32, bool) {
	tag := p.placed(k, 0)
	for way := range setWays {
		placed := p.loadIndex(p.bucket(k)*setWays + way)
		slot := placed & (1<<p.slotBits - 1)
		if placed != 0 && placed^slot == tag {
			if set := p.set(slot); set.Key == k.key && upfSetKind(set.Kind) == k.kind {
				return slot, true
			}
		}
	}
	return 0, false
}

// inUse is the number of keys with a set.
func (p *pdrSets) inUse() int {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return len(p.where)
}

// each calls f with every key and its set, under p.mu read-locked.
func (p *pdrSets) each(f func(setKey, PDRSet)) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	for k, at := range p.where {
		set := *p.set(at.slot)
		set.Key, set.Kind = 0, 0
		f(k, set)
	}
}

func (p *pdrSets) keys(kind upfSetKind) []uint64 {
	p.mu.RLock()
	defer p.mu.RUnlock()
	var keys []uint64
	for k := range p.where {
		if k.kind == kind {
			keys = append(keys, k.key)
		}
	}
	return keys
}

package upfxdp

import (
	"math/bits"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
)

// Which packets of a key its record serves (enum record_families).
const (
	recordIPv4 = uint8(upfRecordFamiliesRECORD_IPV4)
	recordIPv6 = uint8(upfRecordFamiliesRECORD_IPV6)
)

// recordsWritten says whether this build writes set_records: a packet
// orders its reads of a record's sequence word around the copy with
// compiler barriers alone, which only x86-64's load ordering makes
// enough. Elsewhere every packet finds its PDRs in its set.
const recordsWritten = runtime.GOARCH == "amd64"

// recordBucketBits sizes set_records to two buckets (of setWays records)
// a session at least, a bucket for each of its TEID and UE address: 512
// MiB at a million sessions, where about one key in thirty finds its
// bucket and the one beside it full.
func recordBucketBits(maxSessions uint32) uint {
	if !recordsWritten {
		return 0
	}
	return uint(bits.Len32(2*maxSessions - 1))
}

// records are set_records (bpf/upf/structs.h), which the sets keep exact:
// a key's record is written whenever its set is, or the PDR its record
// copies.
type records struct {
	recs mapped[upfSetRecord]
	bits uint // of a bucket number; 0: no records
	// copiedBy are, by PDR slot, the places + 1 of the records that copy
	// it (0: none). A PDR is the first of two sets at most (a UE's IPv4
	// address and IPv6 prefix); a third set's key goes without a record.
	copiedBy [][2]uint32
	// filteredBy are, by SDF set slot, the PDR slots whose records hold
	// that set's filter (record_branch): rewritten when it is. A slot
	// no longer copied stays until then, and its rewrite changes nothing.
	filteredBy map[uint32][]uint32
}

func (r *records) open(m *upfMaps, pdrSlots uint32) (err error) {
	if r.recs, err = mapArray[upfSetRecord](m.SetRecords); err != nil {
		return err
	}
	if n := m.SetRecords.MaxEntries(); n >= uint32(setWays) {
		r.bits = uint(bits.Len32(n/uint32(setWays) - 1))
		r.copiedBy = make([][2]uint32, pdrSlots)
		r.filteredBy = map[uint32][]uint32{}
	}
	return nil
}

func (r *records) close() error { return r.recs.close() }

// recordBuckets are the buckets a key's record may be in: its own, then
// the one beside it in the same page (bpf/upf/consts.h).
const recordBuckets = int(upfLimitsRECORD_BUCKETS)

// bucket is k's own bucket of records.
func (r *records) bucket(k setKey) int { return int(hash(k) >> (64 - r.bits)) }

// places are the places k's record may take, in the order a packet looks.
func (r *records) places(k setKey) (places [recordBuckets * setWays]int) {
	b := r.bucket(k)
	for i := range places {
		places[i] = (b^i/setWays)*setWays + i%setWays
	}
	return places
}

// find is the place of k's record and of the first free place it may
// take, each -1 for none.
func (r *records) find(k setKey) (own, free int) {
	own, free = -1, -1
	for _, pos := range r.places(k) {
		rec := r.recs.at(uint32(pos))
		switch {
		case rec.Kind == uint32(k.kind) && rec.Key == k.key:
			own = pos
		case rec.Kind == 0 && free < 0:
			free = pos
		}
	}
	return own, free
}

// write puts rec at pos, its sequence word odd meanwhile; false (nothing
// written) when rec's PDR has as many records copying it as it can hold.
func (r *records) write(pos int, rec upfSetRecord) bool {
	if !r.ref(pos, rec.PdrSlot) {
		return false
	}
	at := r.recs.at(uint32(pos))
	seq := atomic.LoadUint32(&at.Seq) | 1
	atomic.StoreUint32(&at.Seq, seq)
	rec.Seq = seq
	*at = rec
	atomic.StoreUint32(&at.Seq, seq+1)
	r.noteFilter(&rec)
	return true
}

// noteFilter notes that rec holds its PDR's SDF filter, if it does.
func (r *records) noteFilter(rec *upfSetRecord) {
	if sdf := rec.Pdr.Sdf; rec.Branch.SdfV4 != 0 && !slices.Contains(r.filteredBy[sdf], rec.PdrSlot) {
		r.filteredBy[sdf] = append(r.filteredBy[sdf], rec.PdrSlot)
	}
}

// clear empties the record at pos.
func (r *records) clear(pos int) {
	at := r.recs.at(uint32(pos))
	if at.Kind == 0 {
		return
	}
	r.unref(pos)
	seq := atomic.LoadUint32(&at.Seq) | 1
	atomic.StoreUint32(&at.Seq, seq)
	*at = upfSetRecord{Seq: seq}
	atomic.StoreUint32(&at.Seq, seq+1)
}

// ref notes that the record at pos copies PDR slot: false when the
// slot's references are all taken.
func (r *records) ref(pos int, slot uint32) bool {
	refs := &r.copiedBy[slot]
	if slices.Contains(refs[:], uint32(pos)+1) {
		return true
	}
	i := slices.Index(refs[:], 0)
	if i < 0 {
		return false
	}
	r.unref(pos)
	refs[i] = uint32(pos) + 1
	return true
}

// unref takes the record at pos off the PDR it copies.
func (r *records) unref(pos int) {
	at := r.recs.at(uint32(pos))
	if at.Kind == 0 {
		return
	}
	refs := &r.copiedBy[at.PdrSlot]
	for i := range refs {
		if refs[i] == uint32(pos)+1 {
			refs[i] = 0
		}
	}
}

// recordOf is the record of k, whose set is in slot: the PDR that the
// packets of a family take first when the PDRs above it are all skipped
// for that family (then its PDI checks and SDF filters, on the copy,
// decide; a packet they refuse tries the PDR after it, then the set). ok
// is false when no family has one.
func (p *pdrSets) recordOf(k setKey, slot uint32) (rec upfSetRecord, ok bool) {
	set, pdrs := p.set(slot), p.pdrs
	at, skipped := 0, uint8(0) // the copy's place in the set; the PDRs a family it serves skips
	for _, f := range [...]struct {
		family uint8
		skip   uint8 // the uplink PDRs the family's packets skip
	}{{recordIPv4, set.OnlyV6}, {recordIPv6, set.OnlyV4}} {
		if k.kind != upfSetKindSET_TEID {
			f.skip = 0
		}
		i := 0
		for i < int(set.Count) && i < PDRsPerKey && f.skip&(1<<i) != 0 {
			i++
		}
		if i >= int(set.Count) || i >= PDRsPerKey || set.Pdr[i] >= pdrs.len() {
			continue
		}
		slot := set.Pdr[i]
		pdr := pdrs.at(slot)
		if rec.Families != 0 && slot != rec.PdrSlot {
			continue
		}
		rec.Families |= f.family
		rec.PdrSlot, rec.Pdr = slot, *pdr
		at, skipped = i, skipped|f.skip
	}
	rec.Kind, rec.Key, rec.Set = uint32(k.kind), k.key, slot
	if rec.Families != 0 {
		rec.Branch = p.branchOf(set, at, skipped, &rec.Pdr)
	}
	return rec, rec.Families != 0
}

// branchOf is what the record copying pdr, at place at of set, says of its
// SDF filters and of the PDR after it (struct record_branch): none when
// the packets of a family the record serves skip that PDR (skipped), as
// the set has them do, or when it is in slot 0.
func (p *pdrSets) branchOf(set *PDRSet, at int, skipped uint8, pdr *PDR) (b upfRecordBranch) {
	if next := at + 1; next < min(int(set.Count), PDRsPerKey) && skipped&(1<<next) == 0 {
		b.Next = set.Pdr[next]
	}
	if pdr.Sdf == 0 || pdr.Sdf >= p.sdfSets.len() {
		return b
	}
	// One filter of IPv4 addresses (or any) without ports: the data path
	// matches it on an IPv4 packet as sdf_filter_matches would.
	s := p.sdfSets.at(pdr.Sdf)
	f := &s.Filter[0]
	if s.Count != 1 || f.Flags&(SDFIPv6|SDFPorts) != 0 || f.Src[1]|f.Src[2]|f.Src[3]|f.Dst[1]|f.Dst[2]|f.Dst[3] != 0 {
		return b
	}
	b.Src, b.SrcMask, b.Dst, b.DstMask, b.Proto, b.SdfV4 = f.Src[0], f.SrcMask[0], f.Dst[0], f.DstMask[0], f.Proto, 1
	return b
}

// sdfWritten keeps exact the records that hold the filter of SDF set
// slot, written just now.
func (p *pdrSets) sdfWritten(slot uint32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pdrs := p.records.filteredBy[slot]
	delete(p.records.filteredBy, slot) // the records rewritten note it again
	for _, pdr := range pdrs {
		p.rewriteCopies(pdr)
	}
}

// keepRecord writes k's record as its published set (none: k has none)
// says, or takes it away when no PDR of the set serves a record or k's
// bucket has no room.
func (p *pdrSets) keepRecord(k setKey) {
	at, ok := p.where[k]
	p.recordSet(k, at.slot, ok)
}

// recordSet is keepRecord with k's set in slot, published or not.
func (p *pdrSets) recordSet(k setKey, slot uint32, published bool) {
	r := &p.records
	if r.bits == 0 {
		return
	}
	own, free := r.find(k)
	if own < 0 && free < 0 {
		return // the bucket is full
	}
	var rec upfSetRecord
	ok := published
	if ok {
		rec, ok = p.recordOf(k, slot)
	}
	pos := own
	if pos < 0 {
		pos = free
	}
	if ok && pos >= 0 && r.write(pos, rec) {
		return
	}
	if own >= 0 {
		r.clear(own)
	}
}

// pdrWritten keeps exact the records that copy PDR slot, written just now.
func (p *pdrSets) pdrWritten(slot uint32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rewriteCopies(slot)
}

// rewriteCopies writes again the records that copy PDR slot.
func (p *pdrSets) rewriteCopies(slot uint32) {
	if int(slot) >= len(p.records.copiedBy) {
		return
	}
	for _, ref := range p.records.copiedBy[slot] {
		if ref != 0 {
			rec := p.records.recs.at(ref - 1)
			p.keepRecord(setKey{upfSetKind(rec.Kind), rec.Key})
		}
	}
}

// rebuildRecords makes exact the records a previous run left, the sets
// published being those of used (by slot): a key's record stays if it is
// what its set makes of it, the others go, and the keys left without one
// get theirs. The records that stay are not written: their packets never
// take the cold path meanwhile.
func (p *pdrSets) rebuildRecords(used []bool) {
	r := &p.records
	if r.bits == 0 {
		return
	}
	// Checking reads only: the CPUs share it, each a range of set slots.
	kept := make([]bool, r.recs.len()) // by place: a key's exact record
	workers := runtime.GOMAXPROCS(0)
	unrecorded := make([][]uint32, workers) // set slots
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			unrecorded[w] = p.checkRecords(used, len(used)*w/workers, len(used)*(w+1)/workers, kept)
		})
	}
	wg.Wait()
	for pos := range kept {
		if rec := r.recs.at(uint32(pos)); !kept[pos] || !r.ref(pos, rec.PdrSlot) {
			r.clear(pos)
		} else {
			r.noteFilter(rec)
		}
	}
	for _, slots := range unrecorded {
		for _, slot := range slots {
			set := p.set(slot)
			p.recordSet(setKey{upfSetKind(set.Kind), set.Key}, slot, true)
		}
	}
}

// checkRecords marks in kept the records of the sets in slots from to to
// (those of used) that are what their sets make of them, and returns the
// slots of the sets whose record is not. The sets are read in the order of their slots,
// near that of their PDRs; the records' buckets, in no such order, are
// read ahead a few sets at a time in a loop of reads that wait for no
// other, so that their misses overlap.
func (p *pdrSets) checkRecords(used []bool, from, to int, kept []bool) (unrecorded []uint32) {
	r := &p.records
	var touched uint32
	for slot := max(from, 1); slot < to; slot++ {
		if (slot-from)%readAhead == 0 {
			for ahead := slot; ahead < min(slot+readAhead, to); ahead++ {
				set := p.set(uint32(ahead))
				touched += r.recs.at(uint32(r.places(setKey{upfSetKind(set.Kind), set.Key})[0])).Kind
			}
		}
		if !used[slot] {
			continue
		}
		set := p.set(uint32(slot))
		k := setKey{upfSetKind(set.Kind), set.Key}
		if own, _ := r.find(k); own >= 0 {
			want, ok := p.recordOf(k, uint32(slot))
			have := r.recs.at(uint32(own))
			want.Seq = have.Seq
			if ok && want == *have {
				kept[own] = true
				continue
			}
		}
		unrecorded = append(unrecorded, uint32(slot))
	}
	runtime.KeepAlive(touched)
	return unrecorded
}

// readAhead is how many sets' buckets a rebuild reads ahead.
const readAhead = 32

// Records is how many keys have a record: the others' packets all take
// their PDR sets.
func (d *Datapath) Records() int {
	p := &d.sets
	p.mu.RLock()
	defer p.mu.RUnlock()
	n := 0
	for _, refs := range p.records.copiedBy {
		for _, ref := range refs {
			if ref != 0 {
				n++
			}
		}
	}
	return n
}

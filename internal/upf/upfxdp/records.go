package upfxdp

import (
	"math/bits"
	"runtime"
	"slices"
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

// recordBucketBits sizes set_records to a bucket (setWays records) per
// two sessions: a session's TEID and UE address fill one bucket's worth,
// 256 bytes a session, 512 MiB at a million.
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
}

func (r *records) open(m *upfMaps, pdrSlots uint32) (err error) {
	if r.recs, err = mapArray[upfSetRecord](m.SetRecords); err != nil {
		return err
	}
	if n := m.SetRecords.MaxEntries(); n >= uint32(setWays) {
		r.bits = uint(bits.Len32(n/uint32(setWays) - 1))
		r.copiedBy = make([][2]uint32, pdrSlots)
	}
	return nil
}

func (r *records) close() error { return r.recs.close() }

// first is the place of the first record of k's bucket.
func (r *records) first(k setKey) int { return int(hash(k)>>(64-r.bits)) * setWays }

// find is the place of k's record and of the first free place in its
// bucket, each -1 for none.
func (r *records) find(k setKey) (own, free int) {
	own, free = -1, -1
	for pos := r.first(k); pos < r.first(k)+setWays; pos++ {
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
	return true
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

// recordOf is the record of k, whose set is set: the PDR that the
// packets of a family take first when the PDRs above it are all skipped
// for that family and it has no SDF filter (then its PDI checks, on the
// copy, decide). ok is false when no family has one.
func recordOf(k setKey, set *PDRSet, pdrs mapped[PDR]) (rec upfSetRecord, ok bool) {
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
		if pdr.Sdf != 0 || (rec.Families != 0 && slot != rec.PdrSlot) {
			continue
		}
		rec.Families |= f.family
		rec.PdrSlot, rec.Pdr = slot, *pdr
	}
	rec.Kind, rec.Key = uint32(k.kind), k.key
	return rec, rec.Families != 0
}

// keepRecord writes k's record as its published set (none: k has none)
// says, or takes it away when no PDR of the set serves a record or k's
// bucket has no room.
func (p *pdrSets) keepRecord(k setKey) {
	r := &p.records
	if r.bits == 0 {
		return
	}
	own, free := r.find(k)
	at, ok := p.where[k]
	var rec upfSetRecord
	if ok {
		rec, ok = recordOf(k, p.set(at.slot), p.pdrs)
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

// rebuildRecords makes exact the records a previous run left: a record
// goes when its key has no set or is not of its bucket, and a key's is
// written unless it holds what it should, so that the packets of a key
// whose record stays never take the cold path meanwhile.
func (p *pdrSets) rebuildRecords() {
	r := &p.records
	if r.bits == 0 {
		return
	}
	for pos := range int(r.recs.len()) {
		rec := r.recs.at(uint32(pos))
		if rec.Kind == 0 {
			continue
		}
		k := setKey{upfSetKind(rec.Kind), rec.Key}
		if _, ok := p.where[k]; !ok || r.first(k) != pos-pos%setWays {
			r.clear(pos)
		} else if own, _ := r.find(k); own != pos {
			r.clear(pos) // a second record of k in its bucket
		}
	}
	for k, at := range p.where {
		if own, _ := r.find(k); own >= 0 {
			want, ok := recordOf(k, p.set(at.slot), p.pdrs)
			have := r.recs.at(uint32(own))
			want.Seq = have.Seq
			if ok && *have == want && r.ref(own, want.PdrSlot) {
				continue
			}
		}
		p.keepRecord(k)
	}
}

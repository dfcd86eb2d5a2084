package upfxdp

import (
	"cmp"
	"errors"
	"maps"
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
// that finds its key in a record reads the rest after it with a compiler
// barrier alone, which only x86-64's ordering of loads, and of the
// stores that write the record before its kind, makes enough. Elsewhere
// every packet finds its PDRs in its set.
const recordsWritten = runtime.GOARCH == "amd64"

// recordBucketBits sizes set_records to two buckets (of setWays records)
// a session at least, a bucket for each of its TEID and UE address: 512
// MiB at a million sessions, where about one key in 150 finds its eight
// places full.
func recordBucketBits(maxSessions uint32) uint {
	if !recordsWritten {
		return 0
	}
	return uint(bits.Len32(2*maxSessions - 1))
}

// readAheadBits bounds the records' table (in bucket bits) above which
// find_record starts the reads its key's hint names: past 65,536
// sessions' records (32 MiB) the tables outgrow a server's last-level
// cache, and the hints save a dependent miss a packet; below, they would
// cost a cached packet a few ns for nothing.
const readAheadBits = 17

// readsAhead is the program's read_ahead for a table of bits.
func readsAhead(bits uint) uint32 {
	if bits > readAheadBits {
		return 1
	}
	return 0
}

// records are set_records (bpf/upf/structs.h), which the sets keep exact:
// a key's record is written whenever its set is, or the PDR its record
// copies. Packets read a record where it lies, so a record they may be
// reading is never changed: a new one is written in a free place, its
// kind last, and the old one's kind is taken away, its place held until
// every packet under way then has ended (settle).
type records struct {
	recs mapped[upfSetRecord]
	// hints are, by pair of buckets, what the packets of the records'
	// keys read next (struct record_hints).
	hints mapped[upfRecordHints]
	// counts are what the records' packets counted, by CPU and pair of
	// buckets (struct place_counts); folded, by PDR slot, what the daemon
	// adds to a PDR's counts: what places counted before their records
	// were taken away, and what the PDR counted in a slot before.
	counts mapped[upfPlaceCounts]
	folded mapped[Counter]
	bits   uint // of a bucket number; 0: no records
	// copiedBy are, by PDR slot, the places + 1 of the records that copy
	// it (0: none). A PDR is the first of two sets at most (a UE's IPv4
	// address and IPv6 prefix); a third set's key goes without a record.
	copiedBy [][2]uint32
	// filteredBy are, by SDF set slot, the PDR slots whose records hold
	// that set's filter (record_branch): rewritten when it is. A slot
	// no longer copied stays until then, and its rewrite changes nothing.
	filteredBy map[uint32][]uint32
	// held are the places whose record was taken away and that packets
	// may still be reading; waiting are the keys that found no other
	// place for their record meanwhile.
	held    map[int]bool
	waiting map[setKey]bool
	wake    chan struct{} // tells the settler there are places held
	settled chan struct{} // closed when the settler has stopped
}

func (r *records) open(m *upfMaps, pdrSlots uint32) (err error) {
	if r.recs, err = mapArray[upfSetRecord](m.SetRecords); err != nil {
		return err
	}
	if r.hints, err = mapArray[upfRecordHints](m.RecordHints); err != nil {
		return errors.Join(err, r.recs.close())
	}
	if r.counts, err = mapArray[upfPlaceCounts](m.PlaceCounts); err != nil {
		return errors.Join(err, r.recs.close(), r.hints.close())
	}
	if r.folded, err = mapArray[Counter](m.FoldedCounts); err != nil {
		return errors.Join(err, r.recs.close(), r.hints.close(), r.counts.close())
	}
	if n := m.SetRecords.MaxEntries(); n >= uint32(setWays) {
		r.bits = uint(bits.Len32(n/uint32(setWays) - 1))
		r.copiedBy = make([][2]uint32, pdrSlots)
		r.filteredBy = map[uint32][]uint32{}
		// What a previous run held was held for microseconds, the
		// longest a packet takes, not the time a restart takes.
		r.held, r.waiting = map[int]bool{}, map[setKey]bool{}
	}
	return nil
}

func (r *records) close() error {
	return errors.Join(r.recs.close(), r.hints.close(), r.counts.close(), r.folded.close())
}

// A key's record may be in its own bucket, the one beside it, then the
// pair of buckets beside theirs, in the same page (bpf/upf/consts.h):
// recordBuckets are the buckets of a pair, pairPlaces its places (a
// line of hints and of counts), recordPlaces those a key's record may
// take.
const (
	recordBuckets = int(upfLimitsRECORD_BUCKETS)
	recordPairs   = int(upfLimitsRECORD_PAIRS)
	pairPlaces    = recordBuckets * setWays
	recordPlaces  = recordPairs * pairPlaces
)

// bucket is k's own bucket of records.
func (r *records) bucket(k setKey) int { return int(hash(k) >> (64 - r.bits)) }

// usageSlot is the QER slot whose usage line the packets of k, an
// F-TEID's key, read beside its record, as start_reads finds it
// (PAIR_USAGE_SLOT); false when the packets read no lines ahead or it
// is not below capacity.
func (r *records) usageSlot(k setKey, capacity uint32) (uint32, bool) {
	if readsAhead(r.bits) == 0 {
		return 0, false
	}
	slot := uint32(r.bucket(k)/recordBuckets)*uint32(upfLimitsPAIR_USAGE_SPREAD)&(1<<(r.bits-1)-1) + uint32(upfLimitsPAIR_USAGE_SLOT)
	return slot, slot < capacity
}

// places are the places k's record may take, in the order a packet looks.
// A table of one pair (a single session's) has each place twice: the
// packet's lookups beyond it find nothing.
func (r *records) places(k setKey) (places [recordPlaces]int) {
	b, last := r.bucket(k), 1<<r.bits-1
	for i := range places {
		places[i] = (b^i/setWays)&last*setWays + i%setWays
	}
	return places
}

// find is the place of k's record and of the first free place it may
// take, each -1 for none; held says whether one of k's places is held.
func (r *records) find(k setKey) (own, free int, held bool) {
	own, free = -1, -1
	for _, pos := range r.places(k) {
		rec := r.recs.at(uint32(pos))
		switch {
		case rec.Kind == uint32(k.kind) && rec.Key == k.key:
			own = pos
		case rec.Kind == 0 && r.held[pos]:
			held = true
		case rec.Kind == 0 && free < 0:
			free = pos
		}
	}
	return own, free, held
}

// write puts rec at pos, a free place, its kind last; false (nothing
// written) when rec's PDR has as many records copying it as it can hold.
func (r *records) write(pos int, rec upfSetRecord) bool {
	if !r.ref(pos, rec.PdrSlot) {
		return false
	}
	r.hint(pos, &rec)
	at := r.recs.at(uint32(pos))
	kind := rec.Kind
	rec.Kind, rec.Seq, rec.Place = 0, atomic.LoadUint32(&at.Seq)&^1, uint32(pos)+1
	*at = rec
	atomic.StoreUint32(&at.Kind, kind)
	r.noteFilter(&rec)
	return true
}

// hint writes what the packets of rec, at pos, read after it: the hint
// of a place whose record is gone stays until the next is written there,
// its tag that of a key without a record here, whose packets read their
// set's lines anyway.
func (r *records) hint(pos int, rec *upfSetRecord) {
	h := &r.hints.at(uint32(pos / pairPlaces)).Place[pos%pairPlaces]
	h.Tag = uint32(hash(setKey{upfSetKind(rec.Kind), rec.Key}))
	h.UsageSlot, h.UrrSlot = rec.Pdr.Qer[0], rec.Pdr.Urr[0]
	if h.UsageSlot == 0 || h.UsageSlot == h.UrrSlot {
		h.UsageSlot, h.UrrSlot = cmp.Or(h.UsageSlot, h.UrrSlot), 0
	}
}

// noteFilter notes that rec holds its PDR's SDF filter, if it does.
func (r *records) noteFilter(rec *upfSetRecord) {
	if sdf := rec.Pdr.Sdf; rec.Branch.SdfV4 != 0 && !slices.Contains(r.filteredBy[sdf], rec.PdrSlot) {
		r.filteredBy[sdf] = append(r.filteredBy[sdf], rec.PdrSlot)
	}
}

// clear takes the record at pos away: its kind, at once; its place is
// held until the packets that may be reading it have ended.
func (r *records) clear(pos int) {
	at := r.recs.at(uint32(pos))
	if at.Kind == 0 {
		return
	}
	r.unref(pos)
	atomic.StoreUint32(&at.Kind, 0)
	r.held[pos] = true
	select {
	case r.wake <- struct{}{}:
	default:
	}
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

// placeCounter is CPU cpu's counter of place pos.
func (r *records) placeCounter(cpu uint32, pos int) *Counter {
	pair := r.counts.at(cpu*r.hints.len() + uint32(pos/pairPlaces)) // a hints' line a pair
	return &pair.Place[pos%pairPlaces]
}

// cpus are the CPUs that have counts of places.
func (r *records) cpus() uint32 { return r.counts.len() / r.hints.len() }

// placeCount is what the packets of the record at pos counted there.
func (r *records) placeCount(pos int) (sum Counter) {
	for cpu := range r.cpus() {
		addTo(&sum, loadCounter(r.placeCounter(cpu, pos)))
	}
	return sum
}

// fold moves what the place pos counted into the counts of its record's
// PDR, once no packet may count there: its record was taken away, and
// every packet that may have been reading it has ended.
func (r *records) fold(pos int) {
	sum := r.placeCount(pos)
	if sum == (Counter{}) {
		return
	}
	addTo(r.folded.at(r.recs.at(uint32(pos)).PdrSlot), sum)
	r.zeroPlace(pos)
}

// zeroPlace zeroes what the place pos counted on every CPU.
func (r *records) zeroPlace(pos int) {
	for cpu := range r.cpus() {
		c := r.placeCounter(cpu, pos)
		atomic.StoreUint64(&c.Packets, 0)
		atomic.StoreUint64(&c.Bytes, 0)
	}
}

// placesOf calls f with the places of the records of PDR slot: theirs
// now, and those taken away and not yet folded.
func (r *records) placesOf(slot uint32, f func(pos int)) {
	for _, ref := range r.copiedBy[slot] {
		if ref != 0 {
			f(int(ref - 1))
		}
	}
	for pos := range r.held {
		if r.recs.at(uint32(pos)).PdrSlot == slot {
			f(pos)
		}
	}
}

// zeroPlaced zeroes what the records of PDR slots counted in their
// places, and folded.
func (p *pdrSets) zeroPlaced(slots []uint32) {
	r := &p.records
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, slot := range slots {
		*r.folded.at(slot) = Counter{}
		if r.bits != 0 {
			r.placesOf(slot, r.zeroPlace)
		}
	}
}

// carry adds c to what PDR slot folded.
func (p *pdrSets) carry(slot uint32, c Counter) {
	p.mu.Lock()
	defer p.mu.Unlock()
	addTo(p.records.folded.at(slot), c)
}

// placedCount is what PDR slot counted but in its rows: folded, and what
// the packets its records served counted in their places and in those of
// records taken away and not yet folded.
func (p *pdrSets) placedCount(slot uint32) (sum Counter) {
	r := &p.records
	p.mu.RLock()
	defer p.mu.RUnlock()
	sum = loadCounter(r.folded.at(slot))
	if r.bits == 0 {
		return sum
	}
	r.placesOf(slot, func(pos int) { addTo(&sum, r.placeCount(pos)) })
	return sum
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
	delete(r.waiting, k)
	own, free, held := r.find(k)
	var rec upfSetRecord
	ok := published && !p.unrecorded[k]
	if ok {
		rec, ok = p.recordOf(k, slot)
	}
	if own >= 0 {
		if have := r.recs.at(uint32(own)); ok && sameRecord(have, &rec) {
			r.noteFilter(have)
			return
		}
		r.clear(own)
		held = true
	}
	switch {
	case !ok:
	case free >= 0:
		r.write(free, rec)
	case held:
		r.waiting[k] = true // the packets reading a held place end soon
	}
}

// sameRecord says whether the record have is rec, wherever it lies.
func sameRecord(have, rec *upfSetRecord) bool {
	want := *rec
	want.Seq, want.Place = have.Seq, have.Place
	return want == *have
}

// settle frees the places held when it was called once every packet that
// may be reading them has ended, and writes the records of the keys that
// waited for a place meanwhile.
func (p *pdrSets) settle() error {
	r := &p.records
	p.mu.Lock()
	held := slices.Collect(maps.Keys(r.held))
	p.mu.Unlock()
	if len(held) == 0 {
		return nil
	}
	if err := waitForPackets(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pos := range held {
		r.fold(pos)
		delete(r.held, pos)
	}
	for _, k := range slices.Collect(maps.Keys(r.waiting)) {
		p.keepRecord(k)
	}
	return nil
}

// startSettler settles the records' places in the background whenever
// some are held, until stopSettler. Where the kernel cannot wait for the
// packets under way (nohz_full), places stay held: their keys' packets
// take their sets.
func (p *pdrSets) startSettler() {
	r := &p.records
	wake, settled := make(chan struct{}, 1), make(chan struct{})
	p.mu.Lock()
	r.wake, r.settled = wake, settled
	if len(r.held) > 0 {
		wake <- struct{}{}
	}
	p.mu.Unlock()
	go func() {
		defer close(settled)
		for range wake {
			_ = p.settle()
		}
	}()
}

// stopSettler stops what startSettler started, once it is done.
func (p *pdrSets) stopSettler() {
	p.mu.Lock()
	wake := p.records.wake
	p.records.wake = nil
	p.mu.Unlock()
	if wake != nil {
		close(wake)
		<-p.records.settled
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
		if rec := r.recs.at(uint32(pos)); rec.Kind == 0 {
			r.fold(pos) // taken away by a run that stopped before it folded it
		} else if !kept[pos] || !r.ref(pos, rec.PdrSlot) {
			r.clear(pos)
		} else {
			r.noteFilter(rec)
			r.hint(pos, rec) // a build before the hints left none
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
		if own, _, _ := r.find(k); own >= 0 {
			want, ok := p.recordOf(k, uint32(slot))
			if ok && sameRecord(r.recs.at(uint32(own)), &want) {
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

// UnrecordedKeys is how many keys were put to take no record
// (PutUnrecordedUplink).
func (d *Datapath) UnrecordedKeys() int {
	p := &d.sets
	p.mu.RLock()
	defer p.mu.RUnlock()
	return len(p.unrecorded)
}

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

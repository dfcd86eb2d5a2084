package upfxdp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"
)

// The session layer writes rules through these. Array slots are written
// before the keys that reference them and keys are removed before their
// slots are reused, so a packet never sees a half-written rule. PDRs (each
// with its FAR) and SDF sets are written through mmap; a QER, whose
// buckets the data path locks, cannot be mmapped (the tokens the CPUs
// took from them, in usage_lines, are).

// PutPDR writes a PDR slot. Its counters are left as they are: a slot
// taken for a new PDR must have them zeroed (ZeroPDRCounters) once no
// packet can count in it for the old one.
func (d *Datapath) PutPDR(slot uint32, p PDR) error {
	if !d.pdrWritten.Load() {
		d.pdrWritten.Store(true)
	}
	if err := d.pdrs.put(slot, &p); err != nil {
		return err
	}
	d.sets.pdrWritten(slot)
	return nil
}

// SetPDRNexthop points the FAR of a PDR slot in use at another next-hop
// slot, in one aligned store: a packet reads the old slot or the new one.
func (d *Datapath) SetPDRNexthop(slot, nexthop uint32) error {
	if slot >= d.pdrs.len() {
		return fmt.Errorf("%s: slot %d is not in 0..%d", d.pdrs.name, slot, int64(d.pdrs.len())-1)
	}
	atomic.StoreUint32(&d.pdrs.at(slot).Far.Nexthop, nexthop)
	d.sets.pdrWritten(slot)
	return nil
}

// ZeroPDRCounters zeroes the counters of PDR slots on every CPU, and in
// the places of their records.
func (d *Datapath) ZeroPDRCounters(slots []uint32) error {
	if i := slices.IndexFunc(slots, func(slot uint32) bool { return slot >= d.pdrs.len() }); i >= 0 {
		return fmt.Errorf("zeroing PDR counters: slot %d of %d", slots[i], d.pdrs.len())
	}
	for cpu := range d.counterRows() {
		for _, slot := range slots {
			*d.pdrCounter(cpu, slot) = Counter{}
		}
	}
	d.sets.zeroPlaced(slots)
	return nil
}

// QERBucket is one direction of a QER: its rate in bytes per second, its
// size in bytes (the data path counts nanobytes, struct token_bucket).
func QERBucket(rate, burst uint64) upfTokenBucket {
	return upfTokenBucket{Rate: rate, Burst: burst * uint64(time.Second)}
}

// PutQER writes a QER slot; its token buckets start full, and each CPU
// holds a chunk of tokens beside them, as much as it takes from a bucket
// at once beyond a packet's need: the first packet on each CPU reads no
// QER, and the QER's bound across CPUs is the same. No packet may use the
// slot meanwhile (the slot pool's reuse delay): a CPU adding to what it
// holds would keep the old QER's tokens.
func (d *Datapath) PutQER(slot uint32, q QER) error {
	if slot >= d.QERCapacity() {
		return fmt.Errorf("QER slot %d is not in 0..%d", slot, d.QERCapacity()-1)
	}
	for i := range q.Bucket {
		q.Bucket[i].Tokens = q.Bucket[i].Burst
	}
	if err := d.maps.Qers.Put(slot, &q); err != nil {
		return err
	}
	flags := lineQERKnown
	for dir := range q.Bucket {
		if q.GateClosed&(1<<dir) != 0 {
			flags |= lineGateClosed << dir
		}
		if q.Bucket[dir].Rate != 0 {
			flags |= lineMBR << dir
		}
	}
	for cpu := range d.counterRows() {
		l := d.usageLine(cpu, slot)
		for dir := range l.Credit {
			atomic.StoreUint64(&l.Credit[dir], q.Bucket[dir].Burst>>qerChunkShift)
		}
		setLineFlags(l, lineQERFlags, flags)
	}
	return nil
}

// PutSDFSet writes a slot of SDF filters, and the records that hold them.
func (d *Datapath) PutSDFSet(slot uint32, s SDFSet) error {
	if err := d.sdfSets.put(slot, &s); err != nil {
		return err
	}
	d.sets.sdfWritten(slot)
	return nil
}

// SDFSetCapacity is the number of SDF filter slots.
func (d *Datapath) SDFSetCapacity() uint32 { return d.maps.SdfSets.MaxEntries() }

// SDFSet reads a slot of SDF filters back (tests, restoring sessions in
// place).
func (d *Datapath) SDFSet(slot uint32) (SDFSet, error) { return d.sdfSets.get(slot) }

// PDR and QER read a slot back (tests, restoring sessions in place).
func (d *Datapath) PDR(slot uint32) (PDR, error) { return d.pdrs.get(slot) }

func (d *Datapath) QER(slot uint32) (QER, error) {
	var q QER
	return q, d.maps.Qers.Lookup(slot, &q)
}

// UplinkUsageSlot is the QER slot whose usage line the packets of local
// F-TEID f start reading beside its record, before the record names their
// QER: there, a QER that those packets apply first costs them no read
// after the record's. False when the data path reads no lines ahead (one
// sized for few sessions) or f is none of its addresses'.
func (d *Datapath) UplinkUsageSlot(f FTEID) (uint32, bool) {
	k, err := d.teidKey(f)
	if err != nil {
		return 0, false
	}
	return d.sets.records.usageSlot(k, d.QERCapacity())
}

// ReadsAhead says whether the packets start the reads of the lines they
// write beside their record's (a data path sized for more sessions than
// a server's last-level cache holds), and so UplinkUsageSlot has a slot.
func (d *Datapath) ReadsAhead() bool { return readsAhead(d.sets.records.bits) == 1 }

// QERCapacity is the number of QER slots.
func (d *Datapath) QERCapacity() uint32 { return d.maps.Qers.MaxEntries() }

// FTEID is a local F-TEID: a TEID at one of the GTP-U addresses (N3 or
// N9) the data path was opened with.
type FTEID struct {
	Addr netip.Addr
	TEID uint32
}

func (f FTEID) String() string { return fmt.Sprintf("TEID %d at %s", f.TEID, f.Addr) }

// PutUplink points a local F-TEID at its PDRs: those of the G-PDUs sent
// to it.
func (d *Datapath) PutUplink(f FTEID, set PDRSet) error { return d.putUplink(f, set, true) }

// PutUnrecordedUplink is PutUplink for an F-TEID whose packets are few
// (the CP function's to the UE): it takes no record, whose places are
// kept for the keys of subscribers' traffic; its packets find its PDR
// set.
func (d *Datapath) PutUnrecordedUplink(f FTEID, set PDRSet) error { return d.putUplink(f, set, false) }

func (d *Datapath) putUplink(f FTEID, set PDRSet, recorded bool) error {
	k, err := d.teidKey(f)
	if err != nil {
		return err
	}
	return d.sets.put(k, set, recorded)
}

// DeleteUplink removes a local F-TEID; a missing one is not an error.
func (d *Datapath) DeleteUplink(f FTEID) error {
	k, err := d.teidKey(f)
	if err != nil {
		return err
	}
	return d.sets.delete(k)
}

// PutDownlink points a UE address (IPv4) or /64 prefix (IPv6) at its PDRs.
func (d *Datapath) PutDownlink(ue netip.Addr, set PDRSet) error {
	return d.sets.put(ueKey(ue), set, true)
}

// DeleteDownlink removes a UE address; a missing one is not an error.
func (d *Datapath) DeleteDownlink(ue netip.Addr) error { return d.sets.delete(ueKey(ue)) }

// Uplink and Downlink read back what a key points at (for reconciliation
// and tests); ebpf.ErrKeyNotExist when nothing.
func (d *Datapath) Uplink(f FTEID) (PDRSet, error) {
	k, err := d.teidKey(f)
	if err != nil {
		return PDRSet{}, err
	}
	return d.sets.get(k)
}

func (d *Datapath) Downlink(ue netip.Addr) (PDRSet, error) { return d.sets.get(ueKey(ue)) }

// teidKey is the key of a local F-TEID: its TEID as the packet carries it,
// and above it the index of its address (enum set_kind).
func (d *Datapath) teidKey(f FTEID) (setKey, error) {
	i := slices.Index(d.gtpu, f.Addr)
	if i < 0 {
		return setKey{}, fmt.Errorf("%v: not a GTP-U address of the data path", f)
	}
	return setKey{upfSetKindSET_TEID, uint64(NetworkOrder32(f.TEID)) | uint64(i)<<32}, nil
}

func ueKey(ue netip.Addr) setKey {
	if ue.Is4() {
		return setKey{upfSetKindSET_UE4, uint64(AddrKey(ue))}
	}
	return setKey{upfSetKindSET_UE6, Prefix64Key(ue)}
}

// UplinkFTEIDs and DownlinkUEs list every installed key.
func (d *Datapath) UplinkFTEIDs() []FTEID {
	var fteids []FTEID
	for _, k := range d.sets.keys(upfSetKindSET_TEID) {
		fteids = append(fteids, d.fteidOf(k))
	}
	return fteids
}

func (d *Datapath) DownlinkUEs() []netip.Addr {
	var ues []netip.Addr
	for _, kind := range []upfSetKind{upfSetKindSET_UE4, upfSetKindSET_UE6} {
		for _, k := range d.sets.keys(kind) {
			ues = append(ues, ueOf(setKey{kind, k}))
		}
	}
	return ues
}

// EachSet calls f with every installed key, an uplink local F-TEID or (ue
// valid) a downlink UE address, and what it points at, in no order. f
// must not change the keys.
func (d *Datapath) EachSet(f func(fteid FTEID, ue netip.Addr, set PDRSet)) {
	d.sets.each(func(k setKey, set PDRSet) {
		if k.kind == upfSetKindSET_TEID {
			f(d.fteidOf(k.key), netip.Addr{}, set)
		} else {
			f(FTEID{}, ueOf(k), set)
		}
	})
}

// fteidOf is the local F-TEID of an uplink key (the swap is its own
// inverse); Open dropped the keys of indexes beyond the addresses.
func (d *Datapath) fteidOf(key uint64) FTEID {
	return FTEID{Addr: d.gtpu[key>>32], TEID: NetworkOrder32(uint32(key))}
}

// ueOf is the UE address (IPv4) or /64 prefix (IPv6) of a downlink key.
func ueOf(k setKey) netip.Addr {
	if k.kind == upfSetKindSET_UE4 {
		var b [4]byte
		nativeEndianPut32(b[:], uint32(k.key))
		return netip.AddrFrom4(b)
	}
	var b [16]byte
	nativeEndianPut64(b[:8], k.key)
	return netip.AddrFrom16(b)
}

// PutNexthop writes a next-hop slot.
func (d *Datapath) PutNexthop(slot uint32, nh Nexthop) error { return d.maps.Nexthops.Put(slot, nh) }

func ignoreMissing(err error) error {
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		return nil
	}
	return err
}

// PutTunnel6 writes the endpoints of the IPv6 tunnels (FARGTPUv6) whose
// FARs send through next-hop slot: the peer that slot is for and the local
// N3 address, as the header holds them, with their sum. Written before the
// FARs that use it.
func (d *Datapath) PutTunnel6(slot uint32, peer, local netip.Addr) error {
	if !peer.Is6() || peer.Is4In6() || !local.Is6() || local.Is4In6() {
		return fmt.Errorf("tunnel endpoints %v and %v: not IPv6 addresses", peer, local)
	}
	h := upfTunnel6Header{}
	src, dst := local.As16(), peer.As16()
	copy(h.Addrs[:], src[:])
	copy(h.Addrs[len(src):], dst[:])
	// 32-bit words as the program loads them from memory.
	for i := 0; i < len(h.Addrs); i += 4 {
		h.AddrsSum += uint64(binary.NativeEndian.Uint32(h.Addrs[i:]))
	}
	return d.maps.Tunnel6Headers.Put(slot, h)
}

// Tunnel6 is an IPv6 tunnel's endpoints.
type Tunnel6 struct{ Peer, Local [16]byte }

// Tunnel6 reads the IPv6 tunnel endpoints of a next-hop slot.
func (d *Datapath) Tunnel6(slot uint32) (Tunnel6, error) {
	var h upfTunnel6Header
	if err := d.maps.Tunnel6Headers.Lookup(slot, &h); err != nil {
		return Tunnel6{}, err
	}
	return Tunnel6{Peer: [16]byte(h.Addrs[16:]), Local: [16]byte(h.Addrs[:16])}, nil
}

// NexthopCapacity is the number of next-hop slots.
func (d *Datapath) NexthopCapacity() uint32 { return d.maps.Nexthops.MaxEntries() }

// Nexthop reads a next-hop slot.
func (d *Datapath) Nexthop(slot uint32) (Nexthop, error) {
	var nh Nexthop
	return nh, d.maps.Nexthops.Lookup(slot, &nh)
}

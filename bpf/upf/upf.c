// SPDX-License-Identifier: GPL-2.0
/* The UPF data path: GTP-U uplink decapsulation on access interfaces (N3,
 * N9), downlink encapsulation on core interfaces (N6), GTP-U relays (N9),
 * GTP-U over IPv4 or IPv6, GTP-U echo. One instance is loaded per interface with its slot, roles and
 * GTP-U addresses as constants; all instances share the pinned maps. */
#include "../lib/chain.h"
#include "../lib/parser.h"
#include "config.h"
#include "maps.h"
#include "sdf.h"

char LICENSE[] SEC("license") = "GPL";

_Static_assert(CHAIN_IFACES == MAX_IFACES, "a chain's slot is its interface's");

/* What only the Go side reads, put into BTF for bpf2go (-type in
 * internal/upf/upfxdp/gen.go): the constants and the records of the rings
 * and the metadata, which no map or variable carries. */
const struct upf_exports {
	enum limits limits;
	enum iface_role iface_role;
	enum reason reason;
	enum pdr_flags pdr_flags;
	enum far_action far_action;
	enum far_flags far_flags;
	enum nexthop_slot nexthop_slot;
	enum sdf_flags sdf_flags;
	enum qer_dir qer_dir;
	enum urr_index urr_index;
	enum urr_flags urr_flags;
	enum line_flags line_flags;
	enum urr_event_kind urr_event_kind;
	enum set_kind set_kind;
	enum set_hash set_hash;
	enum record_families record_families;
	enum buffer_state buffer_state;
	enum release_magic release_magic;
	enum route_value route_value;
	enum dupl_magic dupl_magic;
	enum dupl_fanout_key dupl_fanout_key;
	enum chain_stage chain_stage;
	enum chain_limits chain_limits;
	enum chain_magic chain_magic;
	struct urr_event urr_event;
	struct buffered_packet buffered_packet;
	struct release_meta release_meta;
	struct dupl_meta dupl_meta;
} upf_exports __attribute__((unused)) = {};

/* What a tunnel adds after the IP header: UDP, GTP-U and the PDU Session
 * Container when there is a QFI. */
#define GTPU_ENCAP_LEN (sizeof(struct udphdr) + sizeof(struct gtpu_hdr))
#define GTPU_ENCAP_QFI_LEN (GTPU_ENCAP_LEN + sizeof(struct gtpu_opt) + sizeof(struct gtpu_pdu_session_dl))
/* Bounds where a copied packet starts in its frame, for the verifier: past
 * Ethernet, IPv4 with options or IPv6, UDP and GTP-U with its extensions. */
#define DUPL_INNER_OFF_MAX 255

INLINE int finish(__u32 len, enum reason r, int action)
{
	__u32 key = iface_slot * REASON_COUNT + r;
	count_packet(&iface_counters, &key, len);
	return action;
}

/* Counts a forwarded packet of len bytes in c (its interface's line or its PDR's row). */
INLINE void count_forward(struct counter *c, __u32 len)
{
	c->packets++;
	c->bytes += len;
}

/* A CPU counts in its own row, as in a per-CPU array, but without that
 * array's first read of where the CPU's value lies: at a million sessions
 * that read missed the cache on every packet of another session and
 * lengthened the longest chain of dependent reads a packet makes. */
INLINE struct counter *cpu_pdr_counter(__u32 slot)
{
	__u32 key = bpf_get_smp_processor_id() * pdr_slots + slot;
	return bpf_map_lookup_elem(&pdr_counters, &key);
}

/* This CPU's usage line of a QER or URR slot. */
INLINE struct usage_line *cpu_usage_line(__u32 slot)
{
	__u32 key = bpf_get_smp_processor_id() * pdr_slots + slot;
	return bpf_map_lookup_elem(&usage_lines, &key);
}

/* This CPU's counts of the records of a pair of buckets (place_counts). */
INLINE struct place_counts *cpu_place_counts(__u32 pair)
{
	__u32 key = bpf_get_smp_processor_id() << (record_bits - 1) | pair;
	return bpf_map_lookup_elem(&place_counts, &key);
}

/* Counts a packet of len bytes that PDR slot took: in the place of the
 * record that served it (place, its set_record.place; 0: none), else in
 * the PDR's row. */
INLINE void count_pdr(__u32 slot, __u32 place, __u32 len)
{
	if (place) {
		place--;
		struct place_counts *pc = cpu_place_counts(place / (RECORD_BUCKETS * SET_WAYS));
		if (pc)
			count_forward(&pc->place[place % (RECORD_BUCKETS * SET_WAYS)], len);
		return;
	}
	struct counter *c = cpu_pdr_counter(slot);
	if (c)
		count_forward(c, len);
}

/* The index of addr in gtpu_addrs; -1 when it is none of them. */
INLINE int gtpu_addr_index(__be32 addr)
{
#pragma unroll
	for (int i = 0; i < MAX_GTPU_ADDRS; i++)
		if (gtpu_addrs[i] && gtpu_addrs[i] == addr)
			return i;
	return -1;
}

/* The index of addr in gtpu_addrs6; -1 when it is none of them. */
INLINE int gtpu_addr_index6(const struct in6_addr *addr)
{
	const __u32 *a = addr->in6_u.u6_addr32;
	__u32 set = gtpu_addrs6_set;
#pragma unroll
	for (int i = 0; i < MAX_GTPU_ADDRS; i++) {
		const volatile __u32 *n = gtpu_addrs6[i];
		if ((set & 1u << i) && n[0] == a[0] && n[1] == a[1] && n[2] == a[2] && n[3] == a[3])
			return i;
	}
	return -1;
}

/* A key's hash, whose top bits are its buckets (enum set_hash). */
INLINE __u64 key_hash(enum set_kind kind, __u64 key)
{
	__u64 h = (key + ((__u64)kind << 56)) * SET_HASH;
	return (h ^ h >> 32) * SET_HASH;
}

/* Starts reading a line that a later read would wait for: a load whose
 * value goes unused. */
#define read_early(p) asm volatile("" ::"r"(*(volatile __u64 *)(p)))

/* Starts the reads of the usage lines that the hint of tag names among
 * those of the pair at: whether one has it. */
INLINE int start_hinted_reads(__u32 at, __u32 bucket, __u32 tag)
{
	struct record_hints *hs = bpf_map_lookup_elem(&record_hints, &at);
	if (!hs)
		return 0;
#pragma unroll
	for (int way = 0; way < RECORD_BUCKETS * SET_WAYS; way++) {
		const struct record_hint *hint = &hs->place[((bucket ^ way / SET_WAYS) & 1) * SET_WAYS + way % SET_WAYS];
		if (hint->tag != tag)
			continue;
		struct usage_line *line = cpu_usage_line(hint->usage_slot);
		if (line)
			read_early(&line->flags);
		if (hint->urr_slot && (line = cpu_usage_line(hint->urr_slot)))
			read_early(&line->flags);
		return 1;
	}
	return 0;
}

/* start_hinted_reads of the pair beside pair: a call of its own, out of
 * the common path's code, as find_record_beside. */
static __attribute__((noinline)) int start_hinted_reads_beside(__u32 pair, __u32 bucket, __u32 tag)
{
	return start_hinted_reads(pair ^ 1, bucket, tag);
}

/* Starts the reads of the lines a packet writes after its record: its
 * pair's counts on this CPU, whose index the bucket gives (a record in the
 * pair beside counts in that pair's line, not read ahead); an F-TEID's
 * packet, the usage line of its pair's QER slot (PAIR_USAGE_SLOT), its
 * QER's where the control plane could give it that one; and its
 * usage lines (slot 0's, never used, when it has none), as the hint of
 * its key names it: the one whose tag is its hash's low 32 bits among
 * those of its places, looked at in the order of the record's places (its
 * pair's hints, then those of the pair beside it, the line beside them).
 * The usage lines' slots are in the record, so their reads would wait for
 * the record's miss; by the hint they wait for the hints' line only, an
 * eighth of the records' table, and by the pair for nothing. */
INLINE void start_reads(enum set_kind kind, __u32 bucket, __u32 tag)
{
	__u32 pair = bucket / RECORD_BUCKETS;
	struct place_counts *pc = cpu_place_counts(pair);
	if (pc)
		read_early(pc);
	if (kind == SET_TEID) {
		struct usage_line *line =
			cpu_usage_line((pair * PAIR_USAGE_SPREAD & ((1u << (record_bits - 1)) - 1)) + PAIR_USAGE_SLOT);
		if (line)
			read_early(&line->flags);
	}
	if (!start_hinted_reads(pair, bucket, tag))
		start_hinted_reads_beside(pair, bucket, tag);
}

/* The record of key among the places of bucket's pair (from 0) or of the
 * pair beside (from 1). */
INLINE const struct set_record *find_record_from(enum set_kind kind, __u64 key, __u32 bucket, const int from)
{
#pragma unroll
	for (int way = from * RECORD_BUCKETS * SET_WAYS; way < (from + 1) * RECORD_BUCKETS * SET_WAYS; way++) {
		__u32 at = (bucket ^ way / SET_WAYS) * SET_WAYS + way % SET_WAYS;
		struct set_record *w = bpf_map_lookup_elem(&set_records, &at);
		if (!w)
			return NULL;
		if (w->key == key && w->kind == kind) {
			asm volatile("" ::: "memory");
			return w;
		}
	}
	return NULL;
}

/* find_record_from the pair beside: a call of its own, so that the few
 * keys placed there, and keys without a record, do not lengthen the
 * common path's code. */
_Static_assert(RECORD_PAIRS == 2, "a key's places are its pair's and the pair beside's");
static __attribute__((noinline)) const struct set_record *find_record_beside(enum set_kind kind, __u64 key,
									      __u32 bucket)
{
	return find_record_from(kind, key, bucket, 1);
}

/* The record of a key, read where it lies: NULL when the key has none.
 * It is in the key's bucket, the bucket beside it, or the pair beside
 * theirs, in the same page (RECORD_PAIRS). The control plane never
 * changes a record a packet may be reading: it takes the record's kind
 * away and writes that place again only once every packet under way then
 * has ended, the kind last
 * (internal/upf/upfxdp/records.go). x86-64 keeps stores and loads in
 * their order, so the compiler's barrier is enough for a packet that
 * finds the key to find the rest as written; the control plane writes
 * records there only (record_bits). */
INLINE const struct set_record *find_record(enum set_kind kind, __u64 key)
{
	if (!record_bits)
		return NULL;
	__u64 h = key_hash(kind, key);
	__u32 bucket = h >> (64 - record_bits);
	if (read_ahead)
		start_reads(kind, bucket, h);
	const struct set_record *w = find_record_from(kind, key, bucket, 0);
	return w ? w : find_record_beside(kind, key, bucket);
}

/* The interface's line on this CPU (iface_cpu_lines). */
INLINE struct iface_cpu_line *iface_line(void)
{
	/* The constant is its own key: no store of it to the stack for the
	 * lookup to load back. */
	return bpf_map_lookup_elem(&iface_cpu_lines, (const void *)&iface_slot);
}

/* Counts a packet of an installed key that no record served. */
INLINE void count_cold(__u32 len)
{
	if (record_bits) {
		__u32 key = iface_slot;
		count_packet(&cold_packets, &key, len);
	}
}

/* The PDR set of a key: in its bucket of set_index, else in set_overflow. */
INLINE struct pdr_set *find_set(enum set_kind kind, __u64 key)
{
	__u64 h = key_hash(kind, key);
	__u32 bucket = h >> (64 - index_bits);
	__u32 below = h << index_bits >> 32; /* the tag's bits */
	struct set_bucket *b = bpf_map_lookup_elem(&set_index, &bucket);
	if (!b)
		return NULL;
	int room = 0;
#pragma unroll
	for (int way = 0; way < SET_WAYS; way++) {
		__u32 place = b->slot[way];
		if (!place)
			room = 1;
		if (!place || (__u64)(place ^ below) >> set_slot_bits)
			continue;
		__u32 slot = place & (((__u64)1 << set_slot_bits) - 1);
		struct pdr_set *set = bpf_map_lookup_elem(&pdr_sets, &slot);
		if (set && set->key == key && set->kind == kind)
			return set;
	}
	/* Only a full bucket has keys in set_overflow (see
	 * internal/upf/upfxdp/sets.go): a key not installed ends here without
	 * the hash lookup. */
	if (room)
		return NULL;
	struct set_key k = { .key = key, .kind = kind };
	__u32 *slot = bpf_map_lookup_elem(&set_overflow, &k);
	return slot ? bpf_map_lookup_elem(&pdr_sets, slot) : NULL;
}

/* The PDR set of a key whose record named its slot (0: none); find_set's
 * when the slot holds another key's set by now. */
INLINE struct pdr_set *recorded_set(enum set_kind kind, __u64 key, __u32 slot)
{
	struct pdr_set *set = slot ? bpf_map_lookup_elem(&pdr_sets, &slot) : NULL;
	return set && set->key == key && set->kind == kind ? set : find_set(kind, key);
}

/* The QFI and UE address an uplink PDR may ask of its packets. */
INLINE int uplink_pdi_matches(const struct pdr *p, const struct gtpu_info *g, const struct iphdr *ip4,
			      const struct ipv6hdr *ip6)
{
	if ((p->flags & PDR_MATCH_QFI) && (!g->has_qfi || g->qfi != p->qfi))
		return 0;
	/* A dual-stack UE's PDR has both flags: each packet is held to the
	 * address of its own family. */
	__u8 ue = p->flags & (PDR_MATCH_UE_V4 | PDR_MATCH_UE_V6);
	if (!ue)
		return 1;
	if (ip4)
		return (ue & PDR_MATCH_UE_V4) && ip4->saddr == p->ue[0];
	const __u32 *prefix = ue == (PDR_MATCH_UE_V4 | PDR_MATCH_UE_V6) ? &p->ue[2] : p->ue;
	return (ue & PDR_MATCH_UE_V6) && ip6 && ipv6_prefix64(&ip6->saddr) == *(__u64 *)prefix;
}

#define NO_PDR 0xffffffff /* no slot of pdrs */

/* Whether the IP packet at ip_off passes PDR p's SDF filters, if it has any. */
INLINE int sdf_passes(struct xdp_md *ctx, __u32 ip_off, const struct pdr *p)
{
	return !p->sdf || sdf_match(ctx, ip_off, p->sdf);
}

/* sdf_passes for the PDR copy of a record that says what its filter is
 * (b->sdf_v4), with the packet's IPv4 header ip4 (NULL: an IPv6 packet):
 * on the record's line, without the SDF set or a parse of the packet. A
 * PDR without filters reads nothing of the branch. */
INLINE int record_sdf_passes(struct xdp_md *ctx, __u32 ip_off, const struct pdr *p, const struct record_branch *b,
			     const struct iphdr *ip4)
{
	if (!p->sdf)
		return 1;
	if (ip4 && b->sdf_v4)
		return (!b->proto || b->proto == ip4->protocol) &&
		       !(((ip4->saddr & b->src_mask) ^ b->src) | ((ip4->daddr & b->dst_mask) ^ b->dst));
	return sdf_passes(ctx, ip_off, p);
}

/* Whether PDR p takes the IP packet at ip_off: its PDI (uplink: g, ip4 or
 * ip6; downlink: NULLs, the UE address that found it) and SDF filters. */
INLINE int pdr_takes(struct xdp_md *ctx, const struct pdr *p, struct gtpu_info *g, struct iphdr *ip4,
		     struct ipv6hdr *ip6, __u32 ip_off)
{
	return (!g || uplink_pdi_matches(p, g, ip4, ip6)) && sdf_passes(ctx, ip_off, p);
}

/* Highest-precedence PDR of a set whose PDI matches, but the one in slot
 * refused (the PDR of the packet's record, which refused it; NO_PDR: none); the
 * IP packet is at ip_off. Uplink gives the GTP-U header and the inner IP
 * header, ip4 or ip6; downlink gives NULLs: the UE address that found the
 * set and the SDF filters are the whole PDI of a downlink PDR. */
INLINE struct pdr *match_pdr(struct xdp_md *ctx, struct pdr_set *set, struct gtpu_info *g,
			     struct iphdr *ip4, struct ipv6hdr *ip6, __u32 ip_off, __u32 refused, __u32 *slot)
{
	/* Uplink PDRs whose filters are all of a family the packet is not. */
	__u8 skip = !g ? 0 : (ip4 ? 0 : set->only_v4) | (ip6 ? 0 : set->only_v6);
	for (int i = 0; i < PDRS_PER_KEY; i++) {
		if (i >= set->count)
			break;
		if ((skip & (1 << i)) || set->pdr[i] == refused)
			continue;
		*slot = set->pdr[i];
		struct pdr *p = bpf_map_lookup_elem(&pdrs, slot);
		if (p && pdr_takes(ctx, p, g, ip4, ip6, ip_off))
			return p;
	}
	return NULL;
}

/* The PDR of a packet its key's record did not serve, from the key's set
 * (refused: the record's PDR, which refused it, else NO_PDR), copied into
 * *pdr with its slot: 0 when none matches. */
INLINE int pdr_from_set(struct xdp_md *ctx, struct pdr_set *set, struct gtpu_info *g, struct iphdr *ip4,
			struct ipv6hdr *ip6, __u32 ip_off, __u32 refused, struct pdr *pdr, __u32 *slot)
{
	count_cold(ctx->data_end - ctx->data);
	struct pdr *p = match_pdr(ctx, set, g, ip4, ip6, ip_off, refused, slot);
	if (!p)
		return 0;
	*pdr = *p;
	return 1;
}

/* The PDR after a record's (next, its slot in pdrs; 0: none), for a packet
 * the record's PDR refused, copied into *pdr with its slot when it takes
 * the packet (pdr_takes): the set's next PDR, as match_pdr would try it,
 * read without the set. */
INLINE int pdr_after_record(struct xdp_md *ctx, __u32 next, struct gtpu_info *g, struct iphdr *ip4,
			    struct ipv6hdr *ip6, __u32 ip_off, struct pdr *pdr, __u32 *slot)
{
	struct pdr *p = next ? bpf_map_lookup_elem(&pdrs, &next) : NULL;
	if (!p || !pdr_takes(ctx, p, g, ip4, ip6, ip_off))
		return 0;
	*pdr = *p;
	*slot = next;
	return 1;
}

/* The coarse clock as of the jiffies it was last read at, kept by every
 * CPU in one variable of the program: a packet reads two words there, no
 * map's per-CPU value. */
struct tick_clock tick;

/* bpf_ktime_get_coarse_ns(), read once a tick: the verifier turns
 * bpf_jiffies64() into a load, where the clock's helper is a call (about
 * 3 ns a packet here). The time is stored before its jiffies, which x86-64
 * keeps in that order for the other CPUs, so that a CPU that finds the
 * jiffies finds their time or a later one. A CPU that reads jiffies just
 * before the tick moves the clock, or whose store comes late, leaves the
 * time of the tick before until the next one: a tick, the clock's own
 * resolution. */
INLINE __u64 coarse_now(void)
{
	__u64 j = bpf_jiffies64();
	if (tick.jiffies == j) {
		asm volatile("" ::: "memory");
		return tick.ns;
	}
	__u64 ns = bpf_ktime_get_coarse_ns();
	tick.ns = ns;
	asm volatile("" ::: "memory");
	tick.jiffies = j;
	return ns;
}

/* Takes len bytes' tokens for a packet from what this CPU holds of a
 * QER's bucket in direction dir (its usage line's credit), without the
 * QER: whether that credit paid; one that cannot pay is left as it was. */
INLINE int credit_pays(struct usage_line *line, int dir, __u32 len)
{
	__u64 need = (__u64)len * NSEC_PER_SEC, held = line->credit[dir];
	if (held < need)
		return 0;
	line->credit[dir] = held - need;
	return 1;
}

/* Takes len bytes' tokens for a packet (credit_pays); when the credit
 * runs short, tops it up from the QER's bucket under the lock, a chunk
 * more than the packet needs. Returns whether the packet passes; one that
 * does not takes nothing. */
INLINE int qer_take(struct qer *q, struct usage_line *line, int dir, __u32 len)
{
	if (credit_pays(line, dir, len))
		return 1;
	__u64 *credit = &line->credit[dir];
	__u64 need = (__u64)len * NSEC_PER_SEC, held = *credit;
	/* The tick-resolution clock costs a few ns where the precise one
	 * costs tens here; the bucket holds many ticks' worth. */
	__u64 now = coarse_now();
	struct token_bucket *b = &q->bucket[dir];
	__u64 want = need - held, taken = 0;
	bpf_spin_lock(&q->lock);
	bucket_refill(b, now);
	if (b->tokens >= want) {
		taken = want + (b->burst >> QER_CHUNK_SHIFT);
		if (taken > b->tokens)
			taken = b->tokens;
		b->tokens -= taken;
	}
	bpf_spin_unlock(&q->lock);
	if (!taken)
		return 0;
	*credit = held + taken - need;
	return 1;
}

/* Applies the gates and maximum bit rates of a PDR's QERs in one direction
 * to a packet of len bytes: 0 to go on, else the reason to drop it. A packet
 * that one QER lets through and a later one drops has taken the first one's
 * tokens: a bucket is locked alone, never two at once. The CPU's usage
 * line of a QER says its gates and whether it has a rate (the control
 * plane writes them before a PDR names the QER, which does not change
 * while one does): a packet its credit pays for reads no QER. A global
 * function, as count_urrs: inline, its lookups took stack the uplink
 * path has no room for. */
__attribute__((noinline)) int enforce_qers(const struct pdr *pdr, int dir, __u32 len)
{
	if (!pdr)
		return REASON_DROP_INTERNAL;
	dir &= 1;
	for (int i = 0; i < QERS_PER_PDR; i++) {
		__u32 slot = pdr->qer[i];
		if (!slot)
			break;
		struct qer *q = bpf_map_lookup_elem(&qers, &slot);
		struct usage_line *line = cpu_usage_line(slot);
		if (!line || !q)
			return REASON_DROP_INTERNAL;
		__u64 flags = line->flags;
		int closed, limited;
		if (flags & LINE_QER_KNOWN) {
			closed = flags & (LINE_GATE_CLOSED << dir);
			limited = flags & (LINE_MBR << dir);
		} else {
			closed = q->gate_closed & (1 << dir);
			limited = q->bucket[dir].rate != 0;
		}
		if (closed)
			return REASON_DROP_QER_GATE;
		if (limited && !qer_take(q, line, dir, len))
			return REASON_DROP_QER_MBR;
	}
	return 0;
}

/* A full ring loses the event: counted, so that the control plane knows to
 * read every URR. */
INLINE void urr_event(__u32 slot, enum urr_event_kind kind)
{
	struct urr_event ev = { .slot = slot, .kind = kind };
	if (bpf_ringbuf_output(&urr_events, &ev, sizeof(ev), 0)) {
		__u32 key = 0;
		__u64 *lost = bpf_map_lookup_elem(&urr_events_lost, &key);
		if (lost)
			(*lost)++;
	}
}

/* Reports quota i once until the control plane writes the limits again:
 * from the packet that reaches it or, when none does exactly, the first
 * packet it drops. */
INLINE void quota_reached(struct urr *u, __u32 slot, int i)
{
	__u64 bit = URR_QUOTA_REPORTED << i;
	if (!(u->flags & bit) && !(__sync_fetch_and_or(&u->flags, bit) & bit))
		urr_event(slot, URR_EVENT_QUOTA);
}

/* Counts a packet of len bytes into a URR with limits (URR_SHARED),
 * shared by every CPU: the add returns the count it added to, so exactly
 * one packet crosses a limit. */
INLINE void count_shared(struct urr *u, __u32 slot, int dir, __u32 len)
{
	for (int j = 0; j < 2; j++) {
		int i = j ? dir : URR_TOTAL;
		__u64 before = __sync_fetch_and_add(&u->bytes[i], len);
		__u64 after = before + len;
		__sync_fetch_and_add(&u->packets[i], 1);
		__u64 threshold = u->threshold[i], quota = u->quota[i];
		if (threshold && before < threshold && threshold <= after)
			urr_event(slot, URR_EVENT_THRESHOLD);
		if (quota && before < quota && quota <= after)
			quota_reached(u, slot, i);
	}
}

/* Counts a packet of len bytes going in direction dir (enum qer_dir) in
 * this CPU's line of a URR without limits. */
INLINE void count_in_line(struct usage_line *line, int dir, __u32 len)
{
	line->count.dir[dir].packets++;
	line->count.dir[dir].bytes += len;
}

/* Keeps the time now (coarse_now) of the packet a URR counted in this
 * CPU's line: its last packet's and, the first since the URR's reset, its
 * first's, which goes into the line's flags beside the bits the control
 * plane writes. */
INLINE void line_times(struct usage_line *line, __u64 now)
{
	__u64 last = line->last_packet;
	if (!last)
		__sync_fetch_and_or(&line->flags, now & -(__u64)LINE_FIRST_PACKET);
	if (last != now)
		line->last_packet = now;
}

/* A URR's flags URR_SHARED and URR_NOTIFY_START, as this CPU's usage
 * line of it says them when it does (the control plane writes them there
 * after the URR's), else as the URR does. */
INLINE __u64 urr_state(const struct usage_line *line, const struct urr *u)
{
	__u64 f = line->flags;
	if (!(f & LINE_URR_KNOWN))
		return u->flags;
	return (f & LINE_URR_SHARED ? URR_SHARED : 0) | (f & LINE_URR_NOTIFY_START ? URR_NOTIFY_START : 0);
}

/* Counts a packet of len inner bytes going in direction dir (URR_UL or
 * URR_DL) into the URRs of pdr that before_qos says (those
 * with their PDR_URR_BEFORE_QOS bit, or the others when 0): 0 to go on,
 * else the reason to drop it. A global function, so that the verifier
 * checks it once: its branches, on every path through both calls and the
 * QERs between them, exceed what the verifier explores.
 * A URR without limits counts in this CPU's usage line with plain adds:
 * the packet waits for no other CPU's line and, when the line knows the
 * URR's flags, neither reads nor looks up the URR. One with limits counts in its shared counters
 * (count_shared). All quotas are checked before anything is counted, so
 * that a dropped packet counts nowhere. Without a lock, the check and the
 * add are apart: CPUs counting at once may each overshoot a quota by one
 * packet. */
__attribute__((noinline)) int count_urrs(const struct pdr *pdr, int dir, __u32 len, int before_qos)
{
	if (!pdr)
		return REASON_DROP_INTERNAL;
	dir = dir == URR_DL ? URR_DL : URR_UL; /* bounds the index for the verifier */
	/* bit n: urr[n] counts; bit n + URRS_PER_PDR: in its shared counters.
	 * The second loop looks the lines up again, from the cache: pointers
	 * kept would take stack the calls before this one need. */
	int counts = 0;
#pragma unroll
	for (int n = 0; n < URRS_PER_PDR; n++) {
		__u32 slot = pdr->urr[n];
		if (!slot)
			break;
		if (!(pdr->flags & (PDR_URR_BEFORE_QOS << n)) != !before_qos)
			continue;
		struct usage_line *line = cpu_usage_line(slot);
		if (!line)
			return REASON_DROP_INTERNAL;
		counts |= 1 << n;
		__u64 f = line->flags;
		if ((f & LINE_URR_KNOWN) && !(f & LINE_URR_SHARED))
			continue;
		struct urr *u = bpf_map_lookup_elem(&urrs, &slot);
		if (!u)
			return REASON_DROP_INTERNAL;
		if (!(urr_state(line, u) & URR_SHARED))
			continue;
		counts |= 1 << (n + URRS_PER_PDR);
		for (int j = 0; j < 2; j++) {
			int i = j ? dir : URR_TOTAL;
			__u64 quota = u->quota[i];
			if (quota && u->bytes[i] + len > quota) {
				quota_reached(u, slot, i);
				return REASON_DROP_URR_QUOTA;
			}
		}
	}
	__u64 now = coarse_now();
#pragma unroll
	for (int n = 0; n < URRS_PER_PDR; n++) {
		if (!(counts & (1 << n)))
			continue;
		__u32 slot = pdr->urr[n];
		struct usage_line *line = cpu_usage_line(slot);
		if (!line)
			return REASON_DROP_INTERNAL;
		int shared = counts & (1 << (n + URRS_PER_PDR));
		__u64 f = line->flags;
		struct urr *u = NULL;
		if (shared || !(f & LINE_URR_KNOWN) || (f & LINE_URR_NOTIFY_START)) {
			u = bpf_map_lookup_elem(&urrs, &slot);
			if (!u)
				return REASON_DROP_INTERNAL;
		}
		if (u && shared)
			count_shared(u, slot, dir, len);
		else
			count_in_line(line, dir - URR_UL, len);
		line_times(line, now);
		/* The line's bit goes first: the control plane sets the URR's
		 * before it, so that a bit it sets again is either seen in the
		 * URR now or left in the line for the next packet. */
		if (u && (urr_state(line, u) & URR_NOTIFY_START)) {
			if (line->flags & LINE_URR_KNOWN)
				__sync_fetch_and_and(&line->flags, ~(__u64)LINE_URR_NOTIFY_START);
			if (__sync_fetch_and_and(&u->flags, ~(__u64)URR_NOTIFY_START) & URR_NOTIFY_START)
				urr_event(slot, URR_EVENT_START);
		}
	}
	return 0;
}

/* The rules of a PDR with one QER and one URR of the same slot (the
 * caller checks the slots), in the common case (Open5GS's session: its
 * QER and a URR without limits), in one pass over this CPU's usage line
 * of that slot: the line knows both, the gate is open, the credit pays
 * for the packet, the URR counts after QoS and sends no event. forwards
 * says whether the FAR lets the packet through. Returns 0 to go on,
 * REASON_DROP_FAR when the FAR drops the packet, another reason to drop
 * it, or -1 for a case this pass does not take, having changed nothing:
 * then enforce_qers and count_urrs. The two calls cost about 14 ns a
 * packet here where the pass, inline, costs about 3: its few lookups fit
 * the uplink path's stack, the functions' did not. */
INLINE int apply_usage_line(const struct pdr *pdr, int dir, __u32 len, int forwards)
{
	dir &= 1;
	if (pdr->qer[1] || pdr->urr[1])
		return -1;
	struct usage_line *line = cpu_usage_line(pdr->qer[0]);
	if (!line)
		return REASON_DROP_INTERNAL;
	__u64 f = line->flags;
	if ((f & (LINE_QER_KNOWN | (LINE_GATE_CLOSED << dir) | LINE_URR_KNOWN | LINE_URR_SHARED |
		  LINE_URR_NOTIFY_START)) != (LINE_QER_KNOWN | LINE_URR_KNOWN))
		return -1;
	if ((f & (LINE_MBR << dir)) && !credit_pays(line, dir, len))
		return -1;
	if (!forwards)
		return REASON_DROP_FAR;
	count_in_line(line, dir, len);
	line_times(line, coarse_now());
	return 0;
}

/* Applies a matched PDR (in slot; its record's place + 1 when the record
 * served the packet, count_pdr) to a packet of len inner bytes going in
 * direction dir (QER_UL or QER_DL): its QERs, its FAR, which must forward
 * (a buffering FAR forwards what its buffer let pass: buffer_passed), with
 * one of the flags far_flags when the path needs one (a tunnel: FAR_GTPU),
 * and its URRs, which count only what the FAR forwards, unless they
 * measure before QoS enforcement: those count first; a QER and a URR of
 * one line in one pass, where it can (apply_usage_line). Returns 0 to
 * forward, else the reason to drop. The PDR counts what its QERs and URRs
 * let through. */
INLINE int apply_pdr(const struct pdr *pdr, __u32 slot, __u32 place, int dir, __u32 len, __u8 far_flags,
		     int buffer_passed)
{
	int urr_dir = dir == QER_UL ? URR_UL : URR_DL;
	__u8 before_qos = pdr->flags & (PDR_URR_BEFORE_QOS * ((1 << URRS_PER_PDR) - 1));
	const struct far *far = &pdr->far;
	int forwards = (far->action == FAR_FORWARD || (buffer_passed && far->action == FAR_BUFFER)) &&
		       !(far_flags && !(far->flags & far_flags));
	int reason;
	if (!before_qos && pdr->qer[0] && pdr->qer[0] == pdr->urr[0] &&
	    (reason = apply_usage_line(pdr, dir, len, forwards)) >= 0) {
		if (reason && reason != REASON_DROP_FAR)
			return reason;
		count_pdr(slot, place, len);
		return reason;
	}
	if (before_qos && (reason = count_urrs(pdr, urr_dir, len, 1)))
		return reason;
	/* A PDR without QERs pays this test, not the call. */
	if (pdr->qer[0] && (reason = enforce_qers(pdr, dir, len)))
		return reason;
	if (!forwards) {
		count_pdr(slot, place, len);
		return REASON_DROP_FAR;
	}
	/* A PDR without URRs pays this test and the flags' above. */
	if (pdr->urr[0] && (reason = count_urrs(pdr, urr_dir, len, 0)))
		return reason;
	count_pdr(slot, place, len);
	return 0;
}

/* The release metadata of a frame the control plane sends back through the
 * program; NULL for a frame from the wire. */
INLINE struct release_meta *release_meta(struct xdp_md *ctx)
{
	struct release_meta *m;
	if (!read_meta(ctx, m) || m->magic != RELEASE_MAGIC)
		return NULL;
	return m;
}

/* The buffer of a buffering FAR, NULL when it is missing; *released says
 * whether it is released. */
INLINE struct buffer *far_buffer(const struct far *far, int *released)
{
	struct buffer *b = bpf_map_lookup_elem(&buffers, &far->buffer);
	*released = b && (b->state & BUFFER_RELEASED);
	return b;
}

/* Hands a downlink frame of pkt_len bytes to the buffer of its buffering
 * FAR: returns the reason to count it by, or 0 to forward it when the
 * buffer is released or the frame is being released from it. */
INLINE int hold(struct xdp_md *ctx, const struct pdr *pdr, __u32 pkt_len)
{
	if (release_meta(ctx))
		return 0;
	int released;
	struct buffer *b = far_buffer(&pdr->far, &released);
	if (!b)
		return REASON_DROP_INTERNAL;
	if (released)
		return 0;
	struct buffered_packet *p = NULL;
	/* The mask bounds the length for the verifier; frames it would cut
	 * are too long to keep. */
	__u32 len = pkt_len & (BUFFERED_FRAME_MAX - 1);
	if (len == pkt_len && len > 0)
		p = bpf_ringbuf_reserve(&buffered_packets, sizeof(*p), 0);
	if (!p) {
		__sync_fetch_and_add(&b->dropped, 1);
		return REASON_DROP_BUFFER_FULL;
	}
	if (bpf_xdp_load_bytes(ctx, 0, p->frame, len)) {
		bpf_ringbuf_discard(p, 0);
		return REASON_DROP_INTERNAL;
	}
	p->buffer = pdr->far.buffer;
	p->iface = iface_slot;
	p->len = len;
	p->pdr = pdr->id;
	p->qfi = pdr->qfi;
	/* Counted before it is visible: the release waits for it. Released
	 * meanwhile, the buffer has taken its last packet: forward this one. */
	if (__sync_fetch_and_add(&b->state, 1) & BUFFER_RELEASED) {
		bpf_ringbuf_discard(p, 0);
		return 0;
	}
	bpf_ringbuf_submit(p, 0);
	return REASON_BUFFERED;
}

/* A FAR that buffered forwards again once its buffer is released: the
 * packets it never buffers (relayed ones) then pass it too. */
INLINE int buffer_released(const struct far *far)
{
	int released = 0;
	if (far->action == FAR_BUFFER)
		far_buffer(far, &released);
	return released;
}

/* Next-hop slot of the longest matching route to an uplink destination
 * by the tables (KERNEL_SLOT when there is none), or ROUTE_LPM when the
 * routes4 trie has it (route4_lpm). */
INLINE __u32 route4_table(__be32 dst)
{
	__u32 host = bpf_ntohl(dst);
	__u32 key = host >> 10;
	struct route_quad *q = bpf_map_lookup_elem(&routes4_tbl24, &key);
	if (!q)
		return KERNEL_SLOT;
	__u16 v = q->slot[(host >> 8) & 3];
	if (v < ROUTE_GROUP || v == ROUTE_LPM)
		return v;
	key = (__u32)(v & ~ROUTE_GROUP) << 6 | (host & 0xff) >> 2;
	q = bpf_map_lookup_elem(&routes4_tbl8, &key);
	return q ? q->slot[host & 3] : KERNEL_SLOT;
}

/* route4_table's slot, the trie's where the tables send it there. */
INLINE __u32 route4_lpm(__be32 dst, __u32 slot)
{
	if (slot != ROUTE_LPM)
		return slot;
	struct route4_key k = { .prefixlen = 32, .addr = dst };
	__u32 *lpm = bpf_map_lookup_elem(&routes4, &k);
	return lpm ? *lpm : KERNEL_SLOT;
}

/* Next-hop slot of the longest matching route to an uplink destination;
 * KERNEL_SLOT when there is none. */
INLINE __u32 route4(__be32 dst)
{
	return route4_lpm(dst, route4_table(dst));
}

INLINE __u32 route6(const struct in6_addr *dst)
{
	struct route6_key k = { .prefixlen = 128 };
	__builtin_memcpy(k.addr, dst, sizeof(k.addr));
	__u32 *lpm = bpf_map_lookup_elem(&routes6, &k);
	return lpm ? *lpm : KERNEL_SLOT;
}

/* Cuts Ethernet padding so the frame of len bytes ends where the IP packet
 * does. */
INLINE int trim_to(struct xdp_md *ctx, __u32 len, __u32 want)
{
	__s32 extra = (__s32)len - (__s32)want;
	if (extra > 0)
		return bpf_xdp_adjust_tail(ctx, -extra);
	return 0;
}

/* Moves the start of the frame so that new_l2 bytes of Ethernet header sit
 * right before the IP packet at inner_off: the frame's start, with room for
 * a tagged header, or NULL. */
INLINE void *l2_room(struct xdp_md *ctx, __u32 inner_off, __u32 new_l2)
{
	int delta = (int)inner_off - (int)new_l2;
	/* A relay whose headers keep their length moves nothing: no call. */
	if (delta && bpf_xdp_adjust_head(ctx, delta))
		return NULL;
	void *data = (void *)(long)ctx->data;
	if (data + ETH_HLEN_VLAN > (void *)(long)ctx->data_end)
		return NULL;
	return data;
}

/* Makes room for the Ethernet header of new_l2 bytes before the IP packet
 * at inner_off (l2_room) and writes it. */
INLINE int put_eth(struct xdp_md *ctx, __u32 inner_off, __u32 new_l2, const __u8 *dmac,
		   const __u8 *smac, __be16 tci, __be16 proto)
{
	void *data = l2_room(ctx, inner_off, new_l2);
	if (!data)
		return -1;
	write_eth(data, dmac, smac, tci, proto);
	return 0;
}

_Static_assert(__builtin_offsetof(struct nexthop, smac) == __builtin_offsetof(struct nexthop, dmac) + ETH_ALEN,
	       "a next hop's MACs are the 12 bytes of an Ethernet header's");

/* Writes the Ethernet header towards the next hop nh, an entry of
 * nexthops, at data, which has room for a tagged one, in three whole words
 * and a half: write_eth copies the MACs byte by byte (struct ethhdr is
 * packed, the stack's MACs may lie anywhere), 26 loads and stores. A map
 * value, unlike the stack, may be read at any offset. */
INLINE void write_nexthop_eth(void *data, const struct nexthop *nh, __be16 tci, __be16 proto)
{
	/* Hidden from the compiler, which would split the reads by the
	 * alignment it knows of the MACs' offsets. */
	const __u8 *mac = nh->dmac;
	asm volatile("" : "+r"(mac));
	*(__u64 *)data = *(const __u64 *)mac;
	*(__u32 *)(data + 8) = *(const __u32 *)(mac + 8);
	if (tci) {
		*(__u32 *)(data + 12) = bpf_htons(ETH_P_8021Q) | (__u32)tci << 16;
		data += sizeof(struct vlan_hdr);
	}
	*(__be16 *)(data + 12) = proto;
}

/* put_eth towards the next hop nh (write_nexthop_eth). */
INLINE int put_nexthop_eth(struct xdp_md *ctx, __u32 inner_off, __u32 new_l2, const struct nexthop *nh,
			   __be16 tci, __be16 proto)
{
	void *data = l2_room(ctx, inner_off, new_l2);
	if (!data)
		return -1;
	write_nexthop_eth(data, nh, tci, proto);
	return 0;
}

/* The second word of a PDU Session Container of type psc_type
 * (GTPU_PSC_DL or GTPU_PSC_UL) with qfi (PPP, RQI, QFI): its length,
 * type, QFI and next extension, as it lies in memory. */
#define PSC_WORD(psc_type, qfi) (1 | (__u32)(psc_type) << 12 | (__u32)(qfi) << 16)

/* Writes the UDP and GTP-U headers of a G-PDU of udp_len bytes from the
 * UDP header on, with teid, no checksum and, when psc (a PSC_WORD) is not
 * 0, a PDU Session Container, in whole words built in registers; returns
 * their sum as csum_to_end would read it, where the UDP checksum over IPv6
 * starts. The caller has checked that they fit. */
INLINE __u64 write_udp_gtpu(struct udphdr *udp, __u32 udp_len, __be32 teid, __u32 psc)
{
	__u32 *w = (void *)udp;
	__u32 flags = GTPU_V1 | GTPU_PT | (psc ? GTPU_E : 0);
	__u32 ports = bpf_htons(GTPU_PORT) | (__u32)bpf_htons(GTPU_PORT) << 16;
	__u32 len = bpf_htons(udp_len); /* and a zero checksum */
	__u32 gtpu = flags | GTPU_G_PDU << 8 | (__u32)bpf_htons(udp_len - GTPU_ENCAP_LEN) << 16;
	__u64 sum = (__u64)ports + len + gtpu + teid;
	w[0] = ports;
	w[1] = len;
	w[2] = gtpu;
	w[3] = teid;
	if (psc) {
		/* Sequence number and N-PDU number 0, then the container. */
		__u32 opt = (__u32)GTPU_EXT_PDU_SESSION_CONTAINER << 24;
		w[4] = opt;
		w[5] = psc;
		sum += (__u64)opt + psc;
	}
	return sum;
}

/* Writes the IPv4, UDP and GTP-U headers of a G-PDU of tot_len bytes from
 * the IPv4 header on, in the tunnel from local to peer with teid and the
 * PDU Session Container psc (write_udp_gtpu); the caller has checked that
 * they fit. */
INLINE void write_gpdu(struct iphdr *ip, __u32 tot_len, __u8 tos, __be32 local, __be32 peer, __be32 teid,
		       __u32 psc)
{
	ipv4_write_udp(ip, tot_len, tos, local, peer);
	write_udp_gtpu((void *)(ip + 1), tot_len - sizeof(*ip), teid, psc);
}

/* The next-hop slot of a copy: its Duplicating Parameters' own, or the
 * route of the copied packet's destination (the IP packet at inner_off);
 * KERNEL_SLOT, never valid, when there is none. */
INLINE __u32 copy_slot(struct xdp_md *ctx, const struct dupl *d, __u32 inner_off)
{
	if (d->nexthop != NEXTHOP_ROUTE)
		return d->nexthop;
	void *end = (void *)(long)ctx->data_end;
	if (inner_off > DUPL_INNER_OFF_MAX)
		return KERNEL_SLOT;
	void *inner = (void *)(long)ctx->data + inner_off;
	struct iphdr *ip4 = inner;
	struct ipv6hdr *ip6 = inner;
	if ((void *)(ip4 + 1) > end)
		return KERNEL_SLOT;
	if (ip4->version == 4)
		return route4(ip4->daddr);
	if ((void *)(ip6 + 1) <= end)
		return route6(&ip6->daddr);
	return KERNEL_SLOT;
}

/* The next hop in slot; NULL while it is not valid. */
INLINE struct nexthop *valid_nexthop(__u32 slot)
{
	struct nexthop *nh = bpf_map_lookup_elem(&nexthops, &slot);
	return nh && nh->valid ? nh : NULL;
}

/* Makes the frame the copy of the IP packet m in it: the
 * packet as the PDR matched it (its TTL or hop limit and IPv4 checksum put
 * back), put into the tunnel of the Duplicating Parameters d when they ask
 * for one, behind the Ethernet header of the next hop nh. */
INLINE int make_copy(struct xdp_md *ctx, const struct dupl *d, const struct nexthop *nh,
		     const struct copied_packet *m)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u32 inner_off = m->inner_off, inner_len = m->inner_len;
	if (inner_off > DUPL_INNER_OFF_MAX)
		return -1;
	struct iphdr *ip4 = data + inner_off;
	struct ipv6hdr *ip6 = data + inner_off;
	if ((void *)(ip4 + 1) > end)
		return -1;
	int v4 = ip4->version == 4;
	if (v4) {
		ip4->ttl = m->ttl;
		ip4->check = m->check;
	} else if ((void *)(ip6 + 1) <= end) {
		ip6->hop_limit = m->ttl;
	} else {
		return -1;
	}
	__be16 tci = nh->vlan_tci;
	__u32 new_l2 = tci ? ETH_HLEN_VLAN : ETH_HLEN;
	__u32 encap = d->flags & FAR_GTPU_IPV4 ? sizeof(struct iphdr) + GTPU_ENCAP_LEN : 0;
	__be16 proto = encap || v4 ? bpf_htons(ETH_P_IP) : bpf_htons(ETH_P_IPV6);
	if (trim_to(ctx, end - data, inner_off + inner_len) ||
	    put_eth(ctx, inner_off, new_l2 + encap, nh->dmac, nh->smac, tci, proto))
		return -1;
	if (!encap)
		return 0;
	data = (void *)(long)ctx->data;
	end = (void *)(long)ctx->data_end;
	struct iphdr *ip = data + new_l2;
	if ((void *)ip + sizeof(struct iphdr) + GTPU_ENCAP_LEN > end)
		return -1;
	write_gpdu(ip, encap + inner_len, d->tos, d->local, d->peer, d->teid, 0);
	return 0;
}

_Static_assert(sizeof(struct mirror_meta) == 32 && sizeof(struct copied_packet) == sizeof(__u64) &&
		       __builtin_offsetof(struct mirror_meta, mirror) == __builtin_offsetof(struct mirror_meta, egress) + 4 &&
		       sizeof(struct mirror_meta) - sizeof(struct chain_mirror_request) ==
			       __builtin_offsetof(struct mirror_meta, egress),
	       "a mirror_meta fills the metadata, the fanout's key in it, the request's magic under its egress; "
	       "a copied_packet goes by value");

/* Sends the frame, ready for the interface ifindex, there, and the copy a
 * mirroring rule of the chain asks for (chain_mirror_request) beside it, as DUPL's:
 * a broadcast through the fanout of the two interfaces, whose copy entry
 * makes the copy of the packet copy (a struct copied_packet) describes. A
 * copy without a fanout (its interface is not one of the UPF's) is counted
 * lost; the frame leaves all the same. Out of line, the packet by value:
 * the packets that no rule mirrors pay a test of their metadata, not the
 * registers or stack of this. */
static __attribute__((noinline)) int send_mirrored(struct xdp_md *ctx, __u32 ifindex, __u64 copy, __u32 pkt_len)
{
	struct mirror_meta *m;
	if (!chain_mirror_of(ctx)) /* the release of a buffered frame's: it stays */
		return bpf_redirect(ifindex, 0);
	if (bpf_xdp_adjust_meta(ctx, -(int)(sizeof(*m) - sizeof(struct chain_mirror_request))) || !read_meta(ctx, m)) {
		drop_meta(ctx);
		return bpf_redirect(ifindex, 0);
	}
	m->magic = MIRROR_MAGIC;
	__builtin_memcpy(&m->packet, &copy, sizeof(m->packet));
	m->egress = ifindex;
	void *fanout = bpf_map_lookup_elem(&dupl_fanouts, &m->egress);
	if (!fanout) {
		drop_meta(ctx);
		finish(pkt_len, REASON_DROP_DUPLICATE, 0);
		return bpf_redirect(ifindex, 0);
	}
	finish(pkt_len, REASON_DUPLICATE, 0);
	return bpf_redirect_map(fanout, 0, BPF_F_BROADCAST);
}

/* Sends the frame, ready for the interface ifindex, there, and the copy
 * of its packet that copy describes too when the PDR's FAR duplicates: a
 * broadcast through the fanout of the two interfaces, whose copy entry
 * makes the copy. A copy that cannot be made (no next hop yet, no fanout)
 * is counted lost; the frame leaves all the same. */
INLINE int send(struct xdp_md *ctx, const struct pdr *pdr, __u32 slot, __u32 ifindex, struct copied_packet *copy,
		__u32 pkt_len)
{
	if (!(pdr->far.flags & FAR_DUPLICATE)) {
		if (ctx->data_meta == ctx->data) /* no rule of a chain mirrors it */
			return bpf_redirect(ifindex, 0);
		__u64 packet;
		__builtin_memcpy(&packet, copy, sizeof(packet));
		return send_mirrored(ctx, ifindex, packet, pkt_len);
	}
	if (chain_mirror_of(ctx))
		drop_meta(ctx); /* DUPL's copy before a mirroring rule's */
	struct dupl *d = bpf_map_lookup_elem(&dupls, &slot);
	__u32 nh_slot = d ? copy_slot(ctx, d, copy->inner_off) : KERNEL_SLOT;
	struct nexthop *nh = valid_nexthop(nh_slot);
	__u64 key = nh ? (__u64)nh->ifindex << 32 | ifindex : 0;
	void *fanout = nh ? bpf_map_lookup_elem(&dupl_fanouts, &key) : NULL;
	struct dupl_meta *m;
	if (!d || !fanout || !push_meta(ctx, m)) {
		finish(pkt_len, REASON_DROP_DUPLICATE, 0);
		return bpf_redirect(ifindex, 0);
	}
	m->magic = DUPL_MAGIC;
	m->packet = *copy;
	m->dupl = *d;
	m->dupl.nexthop = nh_slot;
	finish(pkt_len, REASON_DUPLICATE, 0);
	return bpf_redirect_map(fanout, 0, BPF_F_BROADCAST);
}

/* Sends a copy made in the frame out of ifindex. The kernel runs the
 * program of the first frame a poll redirects to an interface over every
 * frame it redirects there: an interface that takes copies (one a fanout
 * leads to) gets this one through the fanout's copy entry, whose program
 * (xdp_dupl_copy) lets a made copy, without metadata, pass as it is. */
INLINE int send_made_copy(struct xdp_md *ctx, __u32 ifindex)
{
	__u64 key = (__u64)ifindex << 32 | ctx->ingress_ifindex;
	void *fanout = bpf_map_lookup_elem(&dupl_fanouts, &key);
	if (!fanout)
		return bpf_redirect(ifindex, 0);
	drop_meta(ctx);
	return bpf_redirect_map(fanout, FANOUT_COPY, 0);
}

/* The frame of a packet its FAR does not forward (it drops or buffers it)
 * becomes the packet's copy, sent out of the copy's interface: the
 * frame's action, XDP_DROP when no copy can be made. */
INLINE int send_copy_only(struct xdp_md *ctx, __u32 slot, struct copied_packet *copy, __u32 pkt_len)
{
	struct dupl *d = bpf_map_lookup_elem(&dupls, &slot);
	struct nexthop *nh = valid_nexthop(d ? copy_slot(ctx, d, copy->inner_off) : KERNEL_SLOT);
	if (!d || !nh || make_copy(ctx, d, nh, copy))
		return finish(pkt_len, REASON_DROP_DUPLICATE, XDP_DROP);
	finish(pkt_len, REASON_DUPLICATE, 0);
	return send_made_copy(ctx, nh->ifindex);
}

/* The UDP checksum over IPv6 of a datagram whose bytes and pseudo-header
 * sum to sum (unfolded): never 0, which says none, and IPv6 forbids. */
INLINE __u16 udp6_fold(__u64 sum)
{
	__u16 check = csum_fold(csum_fold64(sum));
	return check ? check : 0xffff;
}

/* The UDP checksum over IPv6 of a G-PDU whose IP packet lies at inner_off
 * to the end of the frame and cannot vouch for its bytes (ip_packet_sum
 * said nothing), outer the sum of its pseudo-header and of its UDP and
 * GTP-U headers (their check field zero), which the caller wrote: the IP
 * packet read whole; 0 when the frame is too long to sum. A global
 * function, so that the verifier checks its loops once. */
__attribute__((noinline)) int udp6_check(struct xdp_md *ctx, __u32 inner_off, __u64 outer)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	/* At most ETH_HLEN_VLAN + 40 + GTPU_ENCAP_QFI_LEN: the mask bounds it
	 * for the verifier. */
	__s64 sum = csum_to_end(data + (inner_off & 127), end);
	return sum < 0 ? 0 : udp6_fold(sum + outer);
}

/* A relayed G-PDU whose headers keep their length, untagged Ethernet and
 * IPv4 in and out, no padding, a FAR that forwards without a copy, no
 * mirroring rule's request: its new headers, the IPv4 packet of tot_len
 * bytes in the FAR's tunnel with the PDU Session Container psc (PSC_WORD,
 * 0 for none), go where the old ones lie, at fixed offsets, with one
 * bounds check and no move of the frame's start, and it leaves towards
 * nh. Counted in forwarded. */
INLINE int relay_in_place(struct xdp_md *ctx, const struct far *far, const struct nexthop *nh, __u32 tot_len,
			  __u32 psc, __u32 pkt_len, struct counter *forwarded)
{
	/* Read again: the caller compared it with data_meta, which the
	 * compiler would otherwise take for it. */
	void *data = (void *)(long)*(volatile __u32 *)&ctx->data;
	if (data + ETH_HLEN + sizeof(struct iphdr) + GTPU_ENCAP_QFI_LEN > (void *)(long)ctx->data_end)
		return finish(pkt_len, REASON_DROP_INTERNAL, XDP_DROP);
	write_nexthop_eth(data, nh, 0, bpf_htons(ETH_P_IP));
	write_gpdu(data + ETH_HLEN, tot_len, far->tos, far->local, far->peer, far->teid, psc);
	count_forward(forwarded, pkt_len);
	return bpf_redirect(nh->ifindex, 0);
}

/* Puts the packet of inner_len bytes at inner_off into the FAR's GTP-U/UDP
 * tunnel, over IPv6 when v6 (a constant) and the FAR says so, else IPv4
 * (with a PDU Session Container of psc_type, GTPU_PSC_DL or GTPU_PSC_UL,
 * when the PDR carries a QFI, or else a relayed packet came with one:
 * psc_qfi is its QFI | 0x100, 0 without) and sends it to the FAR's next
 * hop, counted in forwarded (its interface's line), and a copy when it
 * duplicates: the downlink, packets relayed
 * between the gNB and the CP function (N4-u), and over N9 between UPFs
 * both ways. */
INLINE int tunnel_ip(struct xdp_md *ctx, const struct pdr *pdr, __u32 slot, __u32 inner_off, __u32 inner_len,
		     __u32 pkt_len, struct copied_packet *copy, struct counter *forwarded, __u8 psc_type, __u32 psc_qfi,
		     const int v6)
{
	const struct far *far = &pdr->far;
	struct nexthop *nh = bpf_map_lookup_elem(&nexthops, &far->nexthop);
	if (!nh || !nh->valid)
		return finish(pkt_len, REASON_DROP_NO_NEXTHOP, XDP_DROP);
	const struct tunnel6_header *t6 = NULL;
	if (v6 && !(t6 = bpf_map_lookup_elem(&tunnel6_headers, &far->nexthop)))
		return finish(pkt_len, REASON_DROP_INTERNAL, XDP_DROP);
	int with_qfi = pdr->flags & PDR_MARK_QFI;
	__u8 qfi = (pdr->qfi & 0x3f) | (pdr->flags & PDR_MARK_RQI ? 0x40 : 0);
	/* A relay without QoS rules of its own (Open5GS's V-UPF in home-routed
	 * roaming) keeps the QoS flow the packet came in, but towards the SMF. */
	if (!with_qfi && psc_qfi >> 8 && !(far->flags & FAR_TO_CP_FUNCTION)) {
		with_qfi = 1;
		qfi = psc_qfi & 0x3f;
	}
	/* Read once: the control plane may rewrite the slot meanwhile. */
	__be16 tci = nh->vlan_tci;
	__u32 new_l2 = tci ? ETH_HLEN_VLAN : ETH_HLEN;
	const __u32 ip_len = v6 ? sizeof(struct ipv6hdr) : sizeof(struct iphdr);
	__u32 encap = ip_len + (with_qfi ? GTPU_ENCAP_QFI_LEN : GTPU_ENCAP_LEN);
	__u32 psc_word = with_qfi ? PSC_WORD(psc_type, qfi) : 0;
	if (!v6 && !(tci | (inner_off ^ (ETH_HLEN + encap)) | (pkt_len ^ (ETH_HLEN + encap + inner_len))) &&
	    far->action == FAR_FORWARD && !(far->flags & FAR_DUPLICATE) && ctx->data_meta == ctx->data)
		return relay_in_place(ctx, far, nh, encap + inner_len, psc_word, pkt_len, forwarded);
	if (trim_to(ctx, pkt_len, inner_off + inner_len) ||
	    put_nexthop_eth(ctx, inner_off, new_l2 + encap, nh, tci, bpf_htons(v6 ? ETH_P_IPV6 : ETH_P_IP)))
		return finish(pkt_len, REASON_DROP_INTERNAL, XDP_DROP);

	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	void *ip = data + new_l2;
	struct udphdr *udp = ip + ip_len;
	if ((void *)udp + GTPU_ENCAP_QFI_LEN > end)
		return finish(pkt_len, REASON_DROP_INTERNAL, XDP_DROP);
	__u32 udp_len = encap - ip_len + inner_len;
	if (v6) {
		/* Over IPv6 the checksum is mandatory: its headers' part is
		 * summed from the registers they were written from and the
		 * addresses' sum the control plane wrote with them. */
		__u64 outer = ipv6_write_udp(ip, udp_len, far->tos, (const __u64 *)t6->addrs, t6->addrs_sum) +
			      write_udp_gtpu(udp, udp_len, far->teid, psc_word);
		/* The inner packet's sum from its own checksums here, without
		 * the call (a few ns) that only packets which cannot vouch for
		 * their bytes pay. */
		__s64 inner = ip_packet_sum((void *)udp + (encap - ip_len), end);
		if (!(udp->check = inner >= 0 ? udp6_fold(inner + outer) : udp6_check(ctx, new_l2 + encap, outer)))
			return finish(pkt_len, REASON_DROP_INTERNAL, XDP_DROP);
	} else {
		write_gpdu(ip, encap + inner_len, far->tos, far->local, far->peer, far->teid, psc_word);
	}
	if (far->action == FAR_BUFFER) {
		struct release_meta *m = release_meta(ctx);
		if (m) {
			m->ifindex = nh->ifindex;
			count_forward(forwarded, pkt_len);
			return bpf_redirect(nh->ifindex, 0);
		}
	}
	count_forward(forwarded, pkt_len);
	copy->inner_off = new_l2 + encap;
	return send(ctx, pdr, slot, nh->ifindex, copy, pkt_len);
}

INLINE int tunnel(struct xdp_md *ctx, const struct pdr *pdr, __u32 slot, __u32 inner_off, __u32 inner_len,
		  __u32 pkt_len, struct copied_packet *copy, struct counter *forwarded, __u8 psc_type, __u32 psc_qfi)
{
	if (pdr->far.flags & FAR_GTPU_IPV6)
		return tunnel_ip(ctx, pdr, slot, inner_off, inner_len, pkt_len, copy, forwarded, psc_type, psc_qfi, 1);
	return tunnel_ip(ctx, pdr, slot, inner_off, inner_len, pkt_len, copy, forwarded, psc_type, psc_qfi, 0);
}

/* Whether a UDP socket of the packet's namespace takes the G-PDU in ctx:
 * the GTP-U endpoint's on the address it was sent to. Without one (the
 * daemon stopped, its programs still attached) the kernel would answer the
 * sender with an ICMP Port Unreachable from the GTP-U port, while the
 * program answers its echoes. The frame is parsed again, as upf_ingress
 * took it: a cold path. */
static __attribute__((noinline)) int gtpu_socket_listens(struct xdp_md *ctx)
{
	struct cursor c = { .pos = (void *)(long)ctx->data, .end = (void *)(long)ctx->data_end };
	struct bpf_sock_tuple t = {};
	struct ethhdr *eth;
	struct udphdr *udp;
	struct bpf_sock *sk;
	__be16 proto;
	if (parse_eth(&c, &eth, &proto))
		return 0;
	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip;
		if (parse_ipv4(&c, &ip) || !(udp = cursor_take(&c, struct udphdr)))
			return 0;
		t.ipv4.saddr = ip->saddr;
		t.ipv4.daddr = ip->daddr;
		t.ipv4.sport = udp->source;
		t.ipv4.dport = udp->dest;
		sk = bpf_sk_lookup_udp(ctx, &t, sizeof(t.ipv4), BPF_F_CURRENT_NETNS, 0);
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6;
		if (parse_ipv6(&c, &ip6) || !(udp = cursor_take(&c, struct udphdr)))
			return 0;
		__builtin_memcpy(t.ipv6.saddr, &ip6->saddr, sizeof(t.ipv6.saddr));
		__builtin_memcpy(t.ipv6.daddr, &ip6->daddr, sizeof(t.ipv6.daddr));
		t.ipv6.sport = udp->source;
		t.ipv6.dport = udp->dest;
		sk = bpf_sk_lookup_udp(ctx, &t, sizeof(t.ipv6), BPF_F_CURRENT_NETNS, 0);
	} else {
		return 0;
	}
	if (!sk)
		return 0;
	bpf_sk_release(sk);
	return 1;
}

/* A G-PDU to a TEID of ours that no session has: the kernel's GTP-U socket
 * gets it, and the endpoint in user space answers with an Error Indication
 * (TS 29.281 7.3.1), while this CPU has passed fewer than
 * error_indication_rate this second and a socket listens; the others are
 * dropped, so that a flood of random TEIDs costs user space a bounded
 * rate. Both count as REASON_DROP_UNKNOWN_TEID (not forwarded), the passed
 * ones in the window's total too. Nothing of the frame has been changed. */
INLINE int unknown_teid(struct xdp_md *ctx, __u32 pkt_len)
{
	__u32 zero = 0;
	struct unknown_teid_window *w;
	if (error_indication_rate && (w = bpf_map_lookup_elem(&unknown_teid_windows, &zero))) {
		__u64 second = coarse_now() / NSEC_PER_SEC;
		if (w->second != second) {
			w->second = second;
			w->passed = 0;
		}
		if (w->passed < error_indication_rate && gtpu_socket_listens(ctx)) {
			w->passed++;
			w->total++;
			return finish(pkt_len, REASON_DROP_UNKNOWN_TEID, XDP_PASS);
		}
	}
	return finish(pkt_len, REASON_DROP_UNKNOWN_TEID, XDP_DROP);
}

/* Uplink: the inner packet of a G-PDU leaves through the core next hop.
 * key is the G-PDU's TEID | the index of the address it was sent to << 32
 * (set_kind SET_TEID). The packet lies at inner_off, the GTP-U payload_len
 * bytes from there; psc_qfi is the PDU Session Container's QFI | 0x100, 0
 * without one. Inline, once: every G-PDU comes to one call (upf), as a
 * function of its own each packet paid a call and its return, which this
 * kernel's mitigations make dear on some CPUs (7 ns a packet on AMD EPYC). */
INLINE int uplink(struct xdp_md *ctx, __u64 key, __u32 psc_qfi, __u32 payload_len, __u32 inner_off)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u32 pkt_len = end - data;
	struct gtpu_info info = { .qfi = psc_qfi & 0xff, .has_qfi = psc_qfi >> 8, .payload_len = payload_len };
	struct gtpu_info *g = &info;
	struct ethhdr *eth = data;
	/* A frame (a single buffer) is shorter than 16 KiB: the mask bounds
	 * the offset for the verifier, which needs room above it. */
	void *inner = data + (inner_off & 0x3fff);
	if ((void *)(eth + 1) > end)
		return finish(pkt_len, REASON_DROP_INTERNAL, XDP_DROP);
	/* The PDR the packet takes: its key's record's, where it lies, else
	 * one of its set's, copied into this CPU's line. */
	struct iface_cpu_line *line = iface_line();
	if (!line)
		return finish(pkt_len, REASON_DROP_INTERNAL, XDP_DROP);
	struct record_copy *rc = &line->copy;
	const struct set_record *r = find_record(SET_TEID, key);
	const struct pdr *pdr = r ? &r->pdr : &rc->pdr;
	__u32 slot = r ? r->pdr_slot : 0, recorded = r ? r->set : 0, place = r ? r->place : 0;
	__u8 fast = r ? r->families : 0;
	struct pdr_set *set = NULL;
	if (!fast && !(set = find_set(SET_TEID, key)))
		return unknown_teid(ctx, pkt_len);

	/* The verifier learns packet bounds only from data_end, so the inner
	 * parse runs to the frame's end and the length is checked after. */
	struct cursor ic = { .pos = inner, .end = end };
	struct iphdr *ip4 = NULL;
	struct ipv6hdr *ip6 = NULL;
	__u32 inner_len;
	__be16 proto;
	/* Shorter than an IPv4 header, no inner packet is whole: one check
	 * for the version's octet and the IPv4 header's. */
	if (inner + sizeof(struct iphdr) > end)
		return finish(pkt_len, REASON_DROP_MALFORMED, XDP_DROP);
	/* Branch on v4, not on the pointers: the verifier does not know that a
	 * packet pointer is never NULL. */
	int v4 = (*(__u8 *)inner >> 4) == 4;
	if (v4) {
		if (parse_ipv4(&ic, &ip4))
			return finish(pkt_len, REASON_DROP_MALFORMED, XDP_DROP);
		inner_len = bpf_ntohs(ip4->tot_len);
		proto = bpf_htons(ETH_P_IP);
	} else {
		if (parse_ipv6(&ic, &ip6))
			return finish(pkt_len, REASON_DROP_MALFORMED, XDP_DROP);
		inner_len = sizeof(*ip6) + bpf_ntohs(ip6->payload_len);
		proto = bpf_htons(ETH_P_IPV6);
	}

	if (inner_len > g->payload_len)
		return finish(pkt_len, REASON_DROP_MALFORMED, XDP_DROP);
	/* The route of an IPv4 destination by the tables, read before the PDR
	 * says whether it is wanted: its reads then overlap the record's, where
	 * after it they lengthened the chain of reads the packet waits for. */
	__u32 routed4 = v4 ? route4_table(ip4->daddr) : KERNEL_SLOT;

	/* A record's PDI checks and SDF filters run on its copy; a packet
	 * they refuse tries the PDR after it, then the set's others. */
	int served = fast & (v4 ? RECORD_IPV4 : RECORD_IPV6);
	if (!served || !uplink_pdi_matches(pdr, g, ip4, ip6) ||
	    !record_sdf_passes(ctx, inner_off, pdr, &r->branch, v4 ? ip4 : NULL)) {
		if (!(served && pdr_after_record(ctx, r->branch.next, g, ip4, ip6, inner_off, &rc->pdr, &slot))) {
			if (!set && !(set = recorded_set(SET_TEID, key, recorded)))
				return unknown_teid(ctx, pkt_len);
			if (!pdr_from_set(ctx, set, g, ip4, ip6, inner_off, served ? slot : NO_PDR, &rc->pdr, &slot))
				return finish(pkt_len, REASON_DROP_NO_PDR, XDP_DROP);
		}
		pdr = &rc->pdr;
		place = 0;
	}
	const struct far *far = &pdr->far;
	/* From the CP function or the source gNB, the packet is on its way to
	 * the UE: it goes into a tunnel to the gNB, or nowhere while the FAR
	 * buffers. */
	int to_ue = pdr->flags & PDR_TO_UE;
	struct copied_packet copy = {
		.inner_off = inner_off,
		.inner_len = inner_len,
		.ttl = v4 ? ip4->ttl : ip6->hop_limit,
		.check = v4 ? ip4->check : 0,
	};
	/* Each direction's call its own, with constants: the checks of its
	 * usage line then shift and index by none. */
	int released = buffer_released(far);
	int dropped = to_ue ? apply_pdr(pdr, slot, place, QER_DL, inner_len, FAR_GTPU, released)
			    : apply_pdr(pdr, slot, place, QER_UL, inner_len, 0, released);
	if (dropped == REASON_DROP_FAR && (far->flags & FAR_DUPLICATE)) {
		finish(pkt_len, dropped, 0);
		return send_copy_only(ctx, slot, &copy, pkt_len);
	}
	if (dropped)
		return finish(pkt_len, dropped, XDP_DROP);
	/* A relay between the gNB and the CP function, between two gNBs, or
	 * over N9 between UPFs: the packet is theirs, hop limit included
	 * (neighbour discovery needs 255). */
	if (far->flags & FAR_GTPU)
		return tunnel(ctx, pdr, slot, inner_off, inner_len, pkt_len, &copy, &line->relay_forward,
			      to_ue ? GTPU_PSC_DL : GTPU_PSC_UL, psc_qfi);

	__u32 nh_slot = far->nexthop;
	if (nh_slot == NEXTHOP_ROUTE)
		nh_slot = v4 ? route4_lpm(ip4->daddr, routed4) : route6(&ip6->daddr);
	struct nexthop *nh = bpf_map_lookup_elem(&nexthops, &nh_slot);
	int routed = nh && nh->valid;
	__u8 rx_dmac[ETH_ALEN], rx_smac[ETH_ALEN];
	if (routed) {
		if (v4 ? ip4->ttl <= 1 : ip6->hop_limit <= 1)
			return finish(pkt_len, REASON_DROP_TTL, XDP_DROP);
		if (v4)
			ipv4_decrement_ttl(ip4);
		else
			ip6->hop_limit--;
	} else {
		/* The kernel routes the decapsulated packet (decrementing its
		 * TTL, answering an expired one with ICMP) and resolves the
		 * neighbour, which the control plane then learns. The frame
		 * keeps the MACs it arrived with so the kernel takes it. */
		__builtin_memcpy(rx_dmac, eth->h_dest, ETH_ALEN);
		__builtin_memcpy(rx_smac, eth->h_source, ETH_ALEN);
	}
	if (trim_to(ctx, pkt_len, inner_off + inner_len))
		return finish(pkt_len, REASON_DROP_INTERNAL, XDP_DROP);
	if (!routed) {
		if (put_eth(ctx, inner_off, ETH_HLEN, rx_dmac, rx_smac, 0, proto))
			return finish(pkt_len, REASON_DROP_INTERNAL, XDP_DROP);
		/* The kernel takes the packet: no copy of it can be made. */
		if (far->flags & FAR_DUPLICATE)
			finish(pkt_len, REASON_DROP_DUPLICATE, 0);
		return finish(pkt_len, REASON_PASS_NO_ROUTE, XDP_PASS);
	}
	__be16 tci = nh->vlan_tci;
	copy.inner_off = tci ? ETH_HLEN_VLAN : ETH_HLEN;
	if (put_nexthop_eth(ctx, inner_off, copy.inner_off, nh, tci, proto))
		return finish(pkt_len, REASON_DROP_INTERNAL, XDP_DROP);
	count_forward(&line->uplink_forward, pkt_len);
	return send(ctx, pdr, slot, nh->ifindex, &copy, pkt_len);
}

/* Echo Response with a Recovery IE (TS 29.281 7.2.2), sent back where the
 * request came from: behind the CPU map (a constant), which has no XDP_TX,
 * by a redirect to the port it came in on. */
INLINE int echo_response(struct xdp_md *ctx, struct ethhdr *eth, struct iphdr *ip,
			 struct udphdr *udp, __be16 seq, __u32 l2_len, __u32 pkt_len, const int behind_cpumap)
{
	const __u32 gtp_len = sizeof(struct gtpu_hdr) + sizeof(struct gtpu_opt) + 2;
	if (ip->ihl != 5)
		return finish(pkt_len, REASON_PASS_GTP_SIGNALLING, XDP_PASS);
	swap_eth(eth);
	__be32 addr = ip->saddr;
	ip->saddr = ip->daddr;
	ip->daddr = addr;
	__be16 port = udp->source;
	udp->source = udp->dest;
	udp->dest = port;
	if (bpf_xdp_adjust_tail(ctx, (int)(l2_len + sizeof(*ip) + sizeof(*udp) + gtp_len) - (int)pkt_len))
		return finish(pkt_len, REASON_DROP_INTERNAL, XDP_DROP);

	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	if (l2_len > ETH_HLEN_VLAN)
		return finish(pkt_len, REASON_DROP_INTERNAL, XDP_DROP);
	ip = data + l2_len;
	udp = (void *)(ip + 1);
	struct gtpu_hdr *h = (void *)(udp + 1);
	struct gtpu_opt *o = (void *)(h + 1);
	__u8 *ie = (void *)(o + 1);
	if ((void *)(ie + 2) > end)
		return finish(pkt_len, REASON_DROP_INTERNAL, XDP_DROP);
	ip->tot_len = bpf_htons(sizeof(*ip) + sizeof(*udp) + gtp_len);
	ip->ttl = 64;
	ip->frag_off = 0;
	ip->check = 0;
	ip->check = ipv4_csum(ip);
	udp->len = bpf_htons(sizeof(*udp) + gtp_len);
	udp->check = 0;
	h->flags = GTPU_V1 | GTPU_PT | GTPU_S;
	h->type = GTPU_ECHO_RESPONSE;
	h->length = bpf_htons(gtp_len - sizeof(*h));
	h->teid = 0;
	o->seq = seq;
	o->npdu = 0;
	o->next_ext = 0;
	ie[0] = GTPU_IE_RECOVERY;
	ie[1] = 0; /* restart counter: always 0 for GTP-U (TS 29.281 8.2) */
	return finish(pkt_len, REASON_ECHO_RESPONSE, behind_cpumap ? bpf_redirect(ctx->ingress_ifindex, 0) : XDP_TX);
}

/* What uplink takes of a G-PDU: its key (TEID | address index << 32), its
 * PDU Session Container's QFI | 0x100 (0: none), its GTP-U payload's length
 * and where the inner packet starts (0: not such a G-PDU); and whether the
 * frame is of the shape the chain's classify stage hands nothing on for
 * (chain_unhanded), which the UPF stage then need not test again. */
struct gpdu_args {
	__u64 key;
	__u32 psc_qfi;
	__u32 payload_len;
	__u32 inner_off;
	__u32 unhanded;
};

/* What ingress (access_ingress, upf_ingress) returns for a G-PDU, whose
 * uplink arguments it gave, a's inner_off set: no verdict yet, the uplink
 * gives it. */
#define TO_UPLINK -1

/* GTP-U ingress (N3, N9): a UDP datagram to port 2152 of our address of
 * index addr_index (gtpu_addrs, gtpu_addrs6), in an IPv4 packet ip or,
 * when ip is NULL (a constant), an IPv6 one whose header and payload have
 * ip_hdr_len and ip_payload bytes; h is what a classify stage in front
 * handed on of it, NULL for none. The UDP checksum is left to whoever
 * receives the inner packet. Returns the frame's verdict, or TO_UPLINK
 * for a G-PDU, with its uplink arguments in a. */
INLINE int access_ingress(struct xdp_md *ctx, struct ethhdr *eth, struct iphdr *ip, __u32 ip_hdr_len,
			  __u32 ip_payload, struct udphdr *udp, struct cursor *c, __u32 l2_len, __u32 pkt_len,
			  __u32 addr_index, const struct chain_handoff *h, const int behind_cpumap, struct gpdu_args *a)
{
	/* The datagram must fill the IP payload and hold the GTP-U message:
	 * anything after the IP packet is Ethernet padding, not data. */
	__u32 udp_len = bpf_ntohs(udp->len);
	__u32 gtpu_off = l2_len + ip_hdr_len + sizeof(*udp);
	struct gtpu_info g;
	if (udp_len != ip_payload || chain_parse_gtpu(c, gtpu_off, h, &g) ||
	    sizeof(*udp) + g.hdr_len + g.payload_len > udp_len)
		return finish(pkt_len, REASON_DROP_MALFORMED, XDP_DROP);
	/* Over IPv6 the endpoint in user space answers, with the checksum the
	 * kernel computes. */
	if (g.hdr->type == GTPU_ECHO_REQUEST && ip)
		return echo_response(ctx, eth, ip, udp, g.seq, l2_len, pkt_len, behind_cpumap);
	if (g.hdr->type != GTPU_G_PDU)
		return finish(pkt_len, REASON_PASS_GTP_SIGNALLING, XDP_PASS);
	a->key = g.hdr->teid | (__u64)addr_index << 32;
	a->psc_qfi = g.has_qfi ? 0x100 | g.qfi : 0;
	a->payload_len = g.payload_len;
	a->inner_off = gtpu_off + g.hdr_len;
	return TO_UPLINK;
}

#define FAST_GTPU_LEN (sizeof(struct udphdr) + sizeof(struct gtpu_hdr))
#define FAST_GTPU_PSC_LEN (FAST_GTPU_LEN + sizeof(struct gtpu_opt) + sizeof(struct gtpu_pdu_session_dl))
/* What the common G-PDU over IPv4 holds at least: its headers, the
 * container, an inner IPv4 header. */
#define FAST_GPDU_MIN (ETH_HLEN + sizeof(struct iphdr) + FAST_GTPU_PSC_LEN + sizeof(struct iphdr))

/* The common G-PDU, read at fixed offsets after one bounds check: an
 * untagged Ethernet frame, IPv4 without options or fragmentation, or IPv6
 * when v6 (a constant) with UDP as its next header (no extension header),
 * UDP to port 2152 of one of our addresses, GTP-U v1 with either no
 * optional fields or only E and exactly one PDU Session Container of one
 * 4-octet unit ending the chain, and room for an inner IPv4 header:
 * uplink's arguments, as access_ingress would find them. Every other frame
 * (inner_off 0) is the general parser's. Returned by value: registers, no
 * stack. */
INLINE struct gpdu_args fast_gpdu_ip(void *data, void *end, const int v6)
{
	struct gpdu_args a = {};
	const __u32 ip_len = v6 ? sizeof(struct ipv6hdr) : sizeof(struct iphdr);
	/* fast_gpdu checked the bounds of the IPv4 case. */
	if (v6 && data + ETH_HLEN + ip_len + FAST_GTPU_PSC_LEN + sizeof(struct iphdr) > end)
		return a;
	void *ip = data + ETH_HLEN;
	struct udphdr *udp = ip + ip_len;
	struct gtpu_hdr *h = (void *)(udp + 1);
	struct iphdr *ip4 = ip;
	struct ipv6hdr *ip6 = ip;
	if (!gpdu_shaped(ip, v6))
		return a;
	a.unhanded = 1;
	/* The IP payload's length, which the UDP datagram fills. */
	__u32 ip_payload = v6 ? bpf_ntohs(ip6->payload_len) : bpf_ntohs(ip4->tot_len) - sizeof(*ip4);
	__u32 hdr_len = sizeof(*h);
	__u16 flags_type = *(__u16 *)h; /* the GTP-U flags and type in one load */
	if (flags_type == bpf_htons((GTPU_V1 | GTPU_PT | GTPU_E) << 8 | GTPU_G_PDU)) {
		struct gtpu_opt *o = (void *)(h + 1);
		__u32 psc = *(__u32 *)(o + 1); /* length, PDU type, QFI, next type */
		if (o->next_ext != GTPU_EXT_PDU_SESSION_CONTAINER ||
		    (psc & bpf_htonl(0xff0000ff)) != bpf_htonl(0x01000000))
			return a;
		hdr_len = FAST_GTPU_PSC_LEN - FAST_GTPU_LEN + sizeof(*h);
		a.psc_qfi = 0x100 | (((__u8 *)(o + 1))[2] & GTPU_PSC_QFI);
	} else if (flags_type != bpf_htons((GTPU_V1 | GTPU_PT) << 8 | GTPU_G_PDU)) {
		return a;
	}
	/* The lengths parse_ipv4 or parse_ipv6, parse_gtpu and access_ingress
	 * check; the GTP-U message within the UDP datagram is within the
	 * frame. */
	__u32 len = bpf_ntohs(h->length), ext_len = hdr_len - sizeof(*h);
	if ((void *)udp + ip_payload > end || bpf_ntohs(udp->len) != ip_payload || len < ext_len ||
	    sizeof(*udp) + sizeof(*h) + len > ip_payload)
		return a;
	int addr_index = v6 ? gtpu_addr_index6(&ip6->daddr) : gtpu_addr_index(ip4->daddr);
	if (addr_index < 0)
		return a;
	a.key = h->teid | (__u64)addr_index << 32;
	a.payload_len = len - ext_len;
	a.inner_off = ETH_HLEN + ip_len + sizeof(*udp) + hdr_len;
	return a;
}

/* fast_gpdu_ip of the frame's family; the EtherType read in one load
 * (struct ethhdr is packed: its field is read by octets). */
INLINE struct gpdu_args fast_gpdu(void *data, void *end)
{
	struct gpdu_args none = {};
	if (data + FAST_GPDU_MIN > end)
		return none;
	__be16 proto = *(__be16 *)(data + __builtin_offsetof(struct ethhdr, h_proto));
	if (proto == bpf_htons(ETH_P_IP))
		return fast_gpdu_ip(data, end, 0);
	if (proto == bpf_htons(ETH_P_IPV6))
		return fast_gpdu_ip(data, end, 1);
	return none;
}

/* The PDR a downlink packet of a UE address key (family its record's
 * bit) takes, in *pdr with its slot: the record's where it lies (*place
 * its place, apply_pdr), else one of the set's copied into rc. 1, or 0
 * when no set has the key, -1 when none of the set's PDRs matches. */
INLINE int downlink_pdr(struct xdp_md *ctx, enum set_kind kind, __u64 key, __u8 family, __u32 l2_len,
			struct record_copy *rc, __u32 *slot, __u32 *place, const struct pdr **pdr)
{
	const struct set_record *r = find_record(kind, key);
	int served = r ? r->families & family : 0;
	__u32 recorded = r ? r->set : 0;
	*slot = r ? r->pdr_slot : 0;
	*place = 0;
	if (served && sdf_passes(ctx, l2_len, &r->pdr)) {
		*pdr = &r->pdr;
		*place = r->place;
		return 1;
	}
	*pdr = &rc->pdr;
	if (served && pdr_after_record(ctx, r->branch.next, NULL, NULL, NULL, l2_len, &rc->pdr, slot))
		return 1;
	struct pdr_set *set = recorded_set(kind, key, recorded);
	if (!set)
		return 0;
	return pdr_from_set(ctx, set, NULL, NULL, NULL, l2_len, served ? *slot : NO_PDR, &rc->pdr, slot) ? 1 : -1;
}

/* Downlink: add GTP-U/UDP/IP (and a PDU Session Container when the PDR,
 * NULL when none matched, carries a QFI) and send it to the gNB, counted
 * in forwarded; the PDR counts it as apply_pdr says (slot, place). */
INLINE int downlink(struct xdp_md *ctx, const struct pdr *pdr, __u32 slot, __u32 place, int v4, struct iphdr *ip4,
		    struct ipv6hdr *ip6, __u32 l2_len, __u32 pkt_len, struct counter *forwarded)
{
	if (!pdr)
		return finish(pkt_len, REASON_DROP_NO_PDR, XDP_DROP);
	__u32 inner_len = v4 ? bpf_ntohs(ip4->tot_len) : sizeof(*ip6) + bpf_ntohs(ip6->payload_len);
	struct copied_packet copy = {
		.inner_off = l2_len,
		.inner_len = inner_len,
		.ttl = v4 ? ip4->ttl : ip6->hop_limit,
		.check = v4 ? ip4->check : 0,
	};
	int duplicates = pdr->far.flags & FAR_DUPLICATE;
	int dropped;
	if (pdr->far.action == FAR_BUFFER && (dropped = hold(ctx, pdr, pkt_len))) {
		if (dropped != REASON_BUFFERED || !duplicates)
			return finish(pkt_len, dropped, XDP_DROP);
		finish(pkt_len, dropped, 0);
		return send_copy_only(ctx, slot, &copy, pkt_len);
	}
	dropped = apply_pdr(pdr, slot, place, QER_DL, inner_len, FAR_GTPU, 1);
	if (dropped == REASON_DROP_FAR && duplicates) {
		finish(pkt_len, dropped, 0);
		return send_copy_only(ctx, slot, &copy, pkt_len);
	}
	if (dropped)
		return finish(pkt_len, dropped, XDP_DROP);
	if (v4 ? ip4->ttl <= 1 : ip6->hop_limit <= 1)
		return finish(pkt_len, REASON_PASS_TTL, XDP_PASS);
	if (v4)
		ipv4_decrement_ttl(ip4);
	else
		ip6->hop_limit--;
	return tunnel(ctx, pdr, slot, l2_len, inner_len, pkt_len, &copy, forwarded, GTPU_PSC_DL, 0);
}

/* The UPF but its uplink: a frame from the wire, or the UPF stage of a
 * chain, behind the CPU map when behind_cpumap, behind the classify stage
 * on the same CPU when staged (constants): there, for a frame the fixed
 * offsets do not take, it takes the headers the classify stage handed on
 * instead of parsing them again. Returns the frame's verdict, or
 * TO_UPLINK for a G-PDU, whose uplink arguments it gives in a. */
INLINE int upf_ingress(struct xdp_md *ctx, const int behind_cpumap, const int staged, struct gpdu_args *a)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u32 pkt_len = end - data;
	int unhanded = 0;
	if (iface_roles & ROLE_ACCESS) {
		*a = fast_gpdu(data, end);
		if (a->inner_off)
			return TO_UPLINK;
		/* A runt of the shape fast_gpdu read too short claims, and
		 * finds nothing handed on. */
		unhanded = a->unhanded;
	} else if (staged) {
		unhanded = chain_unhanded(data, end);
	}
	const struct chain_handoff *h = staged && !unhanded ? chain_claim(ctx) : NULL;
	struct cursor c = { .pos = data, .end = end };
	struct ethhdr *eth = data;
	__be16 proto;
	if (h) {
		if ((void *)(eth + 1) > end)
			return finish(pkt_len, REASON_DROP_MALFORMED, XDP_DROP);
		c.pos = data + (h->l3_off & 31); /* ETH_HLEN or ETH_HLEN_VLAN: bounded for the verifier */
		proto = h->proto;
	} else if (parse_eth(&c, &eth, &proto)) {
		return finish(pkt_len, REASON_DROP_MALFORMED, XDP_DROP);
	}
	__u32 l2_len = c.pos - data;
	struct iface_cpu_line *line;
	const struct pdr *pdr;
	__u32 slot, place;
	int found;

	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip;
		if (h ? chain_take_ipv4(&c, &ip) : parse_ipv4(&c, &ip))
			return finish(pkt_len, REASON_PASS_NOT_OURS, XDP_PASS);
		int addr_index;
		if ((iface_roles & ROLE_ACCESS) && ip->protocol == IPPROTO_UDP &&
		    (addr_index = gtpu_addr_index(ip->daddr)) >= 0) {
			if (ipv4_is_fragment(ip))
				return finish(pkt_len, REASON_PASS_FRAGMENT, XDP_PASS);
			struct udphdr *udp = cursor_take(&c, struct udphdr);
			if (udp && udp->dest == bpf_htons(GTPU_PORT))
				return access_ingress(ctx, eth, ip, ip->ihl * 4, bpf_ntohs(ip->tot_len) - ip->ihl * 4, udp,
						      &c, l2_len, pkt_len, addr_index, h, behind_cpumap, a);
		}
		if ((iface_roles & ROLE_CORE) && (line = iface_line()) &&
		    (found = downlink_pdr(ctx, SET_UE4, ip->daddr, RECORD_IPV4, l2_len, &line->copy, &slot, &place, &pdr)))
			return downlink(ctx, found > 0 ? pdr : NULL, slot, place, 1, ip, NULL, l2_len, pkt_len,
					&line->downlink_forward);
		return finish(pkt_len, REASON_PASS_NOT_OURS, XDP_PASS);
	}
	if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6;
		if (h ? !(ip6 = cursor_take(&c, struct ipv6hdr)) : parse_ipv6(&c, &ip6))
			return finish(pkt_len, REASON_PASS_NOT_OURS, XDP_PASS);
		/* G-PDUs come with no extension header: a fragment is the
		 * kernel's to reassemble. */
		int addr_index;
		if ((iface_roles & ROLE_ACCESS) && (ip6->nexthdr == IPPROTO_UDP || ip6->nexthdr == IPPROTO_FRAGMENT) &&
		    (addr_index = gtpu_addr_index6(&ip6->daddr)) >= 0) {
			if (ip6->nexthdr == IPPROTO_FRAGMENT)
				return finish(pkt_len, REASON_PASS_FRAGMENT, XDP_PASS);
			struct udphdr *udp = cursor_take(&c, struct udphdr);
			if (udp && udp->dest == bpf_htons(GTPU_PORT))
				return access_ingress(ctx, eth, NULL, sizeof(*ip6), bpf_ntohs(ip6->payload_len), udp, &c,
						      l2_len, pkt_len, addr_index, h, behind_cpumap, a);
		}
		if ((iface_roles & ROLE_CORE) && (line = iface_line()) &&
		    (found = downlink_pdr(ctx, SET_UE6, ipv6_prefix64(&ip6->daddr), RECORD_IPV6, l2_len, &line->copy, &slot, &place, &pdr)))
			return downlink(ctx, found > 0 ? pdr : NULL, slot, place, 0, NULL, ip6, l2_len, pkt_len,
					&line->downlink_forward);
		return finish(pkt_len, REASON_PASS_NOT_OURS, XDP_PASS);
	}
	return finish(pkt_len, REASON_PASS_NOT_IP, XDP_PASS);
}

/* The UPF (upf_ingress), every G-PDU's uplink at one place. */
INLINE int upf(struct xdp_md *ctx, const int behind_cpumap, const int staged)
{
	/* A G-PDU is told by where its packet starts, which only its ingress
	 * sets, not by the verdict, which may be a helper's: on an interface
	 * without the access role the verifier then finds the uplink dead, and
	 * the program carries none of it (the downlink 1 ns faster). */
	struct gpdu_args a = { .inner_off = 0 };
	int verdict = upf_ingress(ctx, behind_cpumap, staged, &a);
	if (!a.inner_off)
		return verdict;
	return uplink(ctx, a.key, a.psc_qfi, a.payload_len, a.inner_off);
}

SEC("xdp")
int xdp_upf(struct xdp_md *ctx)
{
	return upf(ctx, 0, 0);
}

/* The UPF stage of a chain of more than the UPF, by a tail call on the
 * CPU the packet came in on. */
SEC("xdp")
int xdp_upf_stage(struct xdp_md *ctx)
{
	return upf(ctx, 0, 1);
}

/* The UPF stage of a chain on the CPU steering sent a packet to, behind
 * the CPU map. */
SEC("xdp/cpumap")
int xdp_upf_cpu(struct xdp_md *ctx)
{
	return upf(ctx, 1, 0);
}

/* The copy a mirroring rule of a chain asked for (send_mirrored): the IP
 * packet as the PDR matched it, behind the rule's Ethernet addresses. */
INLINE int mirror_copy(struct xdp_md *ctx)
{
	struct mirror_meta *m;
	if (!read_meta(ctx, m))
		return XDP_DROP;
	struct mirror_meta copy = *m;
	struct nexthop nh = {};
	struct dupl plain = {};
	__builtin_memcpy(nh.dmac, copy.mirror.dst, ETH_ALEN);
	__builtin_memcpy(nh.smac, copy.mirror.src, ETH_ALEN);
	if (copy.mirror.ifindex != ctx->egress_ifindex || make_copy(ctx, &plain, &nh, &copy.packet))
		return XDP_DROP;
	return XDP_PASS;
}

/* The copy entry of a dupl_fanouts devmap: of the frame xdp_upf broadcast,
 * its copy, out of the entry's interface. */
SEC("xdp/devmap")
int xdp_dupl_copy(struct xdp_md *ctx)
{
	struct dupl_meta *m;
	if (!read_meta(ctx, m))
		return XDP_PASS; /* a copy made before it was sent (send_made_copy) */
	if (m->magic == MIRROR_MAGIC)
		return mirror_copy(ctx);
	if (m->magic != DUPL_MAGIC)
		return XDP_DROP;
	struct dupl_meta copy = *m;
	struct nexthop *nh = valid_nexthop(copy.dupl.nexthop);
	/* The next hop moved since xdp_upf chose this fanout: the copy is
	 * lost, not sent to the wrong neighbour. */
	if (!nh || nh->ifindex != ctx->egress_ifindex || make_copy(ctx, &copy.dupl, nh, &copy.packet))
		return XDP_DROP;
	return XDP_PASS;
}

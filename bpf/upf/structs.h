/* What the UPF's maps, rings and metadata hold, shared with the Go control
 * plane (bpf2go generates the Go side of each struct). */
#ifndef XDP5G_UPF_STRUCTS_H
#define XDP5G_UPF_STRUCTS_H

#include "../lib/common.h"
#include "../lib/bucket.h"
#include "../lib/chain.h"
#include "../lib/counter.h"
#include "consts.h"

struct far {
	__u8 action; /* enum far_action */
	__u8 flags;  /* enum far_flags */
	__u8 tos;    /* outer ToS or traffic class: DSCP << 2 (Transport Level Marking) */
	__u8 pad;
	__be32 teid;  /* outer TEID */
	__be32 peer;  /* outer IPv4 destination */
	__be32 local; /* outer IPv4 source: our N3 or N9 address */
	__u32 nexthop; /* slot in nexthops, or NEXTHOP_ROUTE */
	__u32 buffer;  /* FAR_BUFFER: slot in buffers */
};

/* One PDR as the packet sees it, with a copy of its FAR so that a packet
 * reads one line for both: 64 bytes, and the mmapped array starts on a
 * page. The precedence is the order in pdr_set. */
struct pdr {
	struct far far;
	__u16 id;    /* PDR ID, for reports */
	__u8 flags;  /* enum pdr_flags */
	__u8 qfi;
	__u32 ue[4]; /* network order (enum pdr_flags says where) */
	__u32 qer[QERS_PER_PDR]; /* slots in qers, every one applies; 0: none */
	__u32 urr[URRS_PER_PDR]; /* slots in urrs, every one counts; 0: none */
	__u32 sdf; /* slot in sdf_sets: one of its filters must match; 0: none */
} __attribute__((aligned(8))); /* copied 8 bytes at a time */
_Static_assert(sizeof(struct pdr) == 64, "a PDR fills one cache line");

/* An SDF filter as the packets of its PDR see it: an uplink PDR's comes
 * with source and destination swapped. Masks and addresses are in network
 * order, IPv4 in word 0; a zero filter matches every packet. */
struct sdf_filter {
	__be32 src[4];
	__be32 src_mask[4];
	__be32 dst[4];
	__be32 dst_mask[4];
	__u16 sport_lo, sport_hi; /* host order, inclusive */
	__u16 dport_lo, dport_hi;
	__u8 proto; /* 0: any */
	__u8 flags; /* enum sdf_flags */
	__u16 pad;
};

/* A PDR's SDF filters, in a slot of their own rather than inline: 308
 * bytes in every one of the four PDR slots per session would cost 80 MB
 * at 64k sessions, and most PDRs have none. One lookup fetches them all. */
struct sdf_set {
	__u32 count;
	struct sdf_filter filter[SDF_PER_PDR];
};

/* A QoS Enforcement Rule: gate and maximum bit rate per direction (enum
 * qer_dir), shared by every PDR that names it. A CPU takes tokens from a
 * bucket under the lock in chunks (struct usage_line) and spends them
 * without it. */
struct qer {
	struct bpf_spin_lock lock;
	__u32 gate_closed; /* bit QER_UL, bit QER_DL */
	struct token_bucket bucket[2];
};

/* A Usage Reporting Rule: what the packets of its PDRs amount to. A URR
 * without limits counts in the CPUs' usage lines, with plain adds;
 * one with a threshold or a quota (URR_SHARED) counts here, shared by
 * every CPU, with atomic adds whose results tell the packet that crosses
 * a limit. Its usage is the sum of both. The control plane writes the
 * limits and reads the counters through mmap. */
struct urr {
	__u64 bytes[3];     /* by enum urr_index: inner IP packet octets since reset */
	__u64 packets[3];
	__u64 threshold[3]; /* bytes; the packet that reaches one sends an event; 0: none */
	__u64 quota[3];     /* bytes; a packet that would exceed one is dropped; 0: none */
	/* bpf_ktime_get_coarse_ns() of the first and last packets a build
	 * before the usage lines counted (they hold them now); 0: none */
	__u64 first_packet;
	__u64 last_packet;
	__u64 flags; /* enum urr_flags; 64 bits: 32-bit atomics need -mcpu=v3 */
};

/* What one CPU counted of a URR without limits, by direction: URR_UL - 1,
 * URR_DL - 1. */
struct urr_count {
	struct counter dir[2];
};

/* One CPU's line of a QER slot and of the URR slot of the same number
 * (usage_lines): what a packet of a session whose QER and URR share their
 * slot number writes, and the state of both it needs, in one line, so
 * that it reads neither the QER nor the URR. The control plane writes
 * flags with atomic ors and ands; without LINE_QER_KNOWN (LINE_URR_KNOWN)
 * the packet reads the QER (URR) itself. */
struct usage_line {
	/* the QER's: tokens (nanobytes) this CPU took from its buckets and
	 * has not spent yet, by enum qer_dir */
	__u64 credit[2];
	struct urr_count count; /* the URR's without limits */
	__u64 last_packet;      /* the URR's: this CPU's last counted packet; 0: none since its reset */
	__u64 flags;            /* enum line_flags; 64 bits: 32-bit atomics need -mcpu=v3 */
};
_Static_assert(sizeof(struct usage_line) == 64, "a usage line fills one cache line");

/* The last reading of the coarse clock and the jiffies it was read at
 * (coarse_now). */
struct tick_clock {
	__u64 jiffies;
	__u64 ns;
};

/* How many G-PDUs to an unknown TEID a CPU passed to the kernel in the
 * second it last passed one in (unknown_teid), and in all. */
struct unknown_teid_window {
	__u64 second; /* the coarse clock's (coarse_now) / NSEC_PER_SEC */
	__u64 passed;
	__u64 total; /* never reset */
};

/* What urr_events carries: the control plane reads the URR's counters. */
struct urr_event {
	__u32 slot; /* in urrs */
	__u32 kind; /* enum urr_event_kind */
};

/* The PDRs sharing a key (TEID or UE address), highest precedence first.
 * The key is kept with them: set_index holds slots only, and a packet takes
 * a set as its own by comparing kind and key. Bit i of only_v4 (only_v6)
 * says every SDF filter of uplink PDR i is of IPv4 (IPv6) addresses: the
 * packets of the other family skip it without reading it (Open5GS puts an
 * IPv6 router solicitations' PDR before every session's uplink PDR). */
struct pdr_set {
	__u64 key;
	__u32 kind; /* enum set_kind */
	__u16 count;
	__u8 only_v4;
	__u8 only_v6;
	__u32 pdr[PDRS_PER_KEY]; /* slots in pdrs */
};

/* What a record says of its PDR copy's SDF filters and of the PDR after
 * it, for a branching point, whose packets the copy's filter refuses go
 * to the set's next PDR: a packet checks the filter on the record's line
 * and reads that PDR where it lies, without the set. */
struct record_branch {
	/* The copy's SDF filters when they are one filter of IPv4 addresses
	 * without ports (free5GC's branching PDR), for IPv4 packets: src and
	 * dst masked must equal them, proto 0 is any. */
	__be32 src, src_mask, dst, dst_mask;
	__u8 proto;
	__u8 sdf_v4; /* 1: the filter above stands for the copy's SDF set */
	__u16 pad;
	__u32 next; /* slot in pdrs of the PDR after the copy's in the set; 0: none */
} __attribute__((aligned(8))); /* copied 8 bytes at a time */

/* What the common case of a key needs, in the table the key hashes into
 * (set_records): the key, and a copy of the PDR its packets take first,
 * so that such a packet reads one record, a pair of lines in one page,
 * and no other table of its session. families says which packets the copy
 * is first for: those whose set's higher PDRs they all skip (only_v4,
 * only_v6); the copy's PDI checks and SDF filters decide on the copy, and
 * a packet they refuse tries the PDR after it (branch), then the set.
 * A packet reads the record where it lies: the control plane never
 * changes a record while a packet may read it (find_record). */
struct set_record {
	__u32 seq; /* even: builds that copied the record checked it around the copy */
	__u32 kind; /* enum set_kind; 0: none */
	__u64 key;
	__u32 pdr_slot; /* the copy's slot in pdrs: its counters and duplicates */
	/* The key's set's slot in pdr_sets: a packet the copy does not serve
	 * takes the set there; a restart checks the record by it. */
	__u32 set;
	__u8 families;  /* enum record_families */
	__u8 pad[3];
	/* The record's place in set_records + 1: its packets count there, in
	 * place_counts, not in its PDR's row of pdr_counters; 0: in the row,
	 * as builds before counted. */
	__u32 place;
	struct record_branch branch; /* in what older builds left zero */
	__u8 pad2[8];
	struct pdr pdr;
};
_Static_assert(sizeof(struct set_record) == 128, "a record is a pair of lines");

/* What a packet of a key reads after its record, told before it: the
 * QER and URR slots of its usage lines, with a tag of the key's hash (its
 * low 32 bits) that says whose it is. A hint only: a stale or torn one
 * costs a wasted read. */
struct record_hint {
	__u32 tag;
	__u32 pad; /* a PDR slot in builds that counted there */
	__u32 usage_slot; /* the copy's first QER, else its first URR; 0: none */
	__u32 urr_slot; /* its first URR when usage_slot is a QER's and the URR's line is another; 0: none (older builds too) */
};

/* The hints of a pair of buckets of set_records, as their places lie (a
 * key's first four places are its pair's, the other four those of the
 * pair beside): one line, read beside the record's, whose index the key's
 * hash gives before the record is found (record_hints). */
struct record_hints {
	struct record_hint place[RECORD_BUCKETS * SET_WAYS];
};
_Static_assert(sizeof(struct record_hints) == 64, "a pair's hints fill one cache line");

/* What one CPU counted of the packets that the records of a pair of
 * buckets of set_records served, by place as record_hints holds them
 * (place_counts): the key's hash names the line before its record is
 * found, where the PDR slot's row of pdr_counters waited for the record. */
struct place_counts {
	struct counter place[RECORD_BUCKETS * SET_WAYS];
};
_Static_assert(sizeof(struct place_counts) == 64, "a pair's counts fill one cache line");

/* The PDR a packet takes when its record does not serve it, copied from
 * pdrs (iface_cpu_lines); branch is what builds that copied the record
 * too copied of it. */
struct record_copy {
	struct pdr pdr;
	struct record_branch branch;
};

/* An interface's line on a CPU as builds that counted only the uplink
 * beside the copy kept it (iface_lines): read for what they counted. */
struct iface_line {
	struct record_copy copy;
	struct counter uplink_forward;
};

/* An interface's line on a CPU (iface_cpu_lines): the copy of the PDR its
 * packet takes from its set, and the counts of its forwarded packets, the common
 * reasons, beside it rather than in iface_counters: one per-CPU lookup a
 * packet instead of two. */
struct iface_cpu_line {
	struct record_copy copy;
	struct counter uplink_forward;
	struct counter downlink_forward;
	struct counter relay_forward;
};

/* Key of set_overflow, the sets whose index places were taken. */
struct set_key {
	__u64 key;
	__u32 kind;
	__u32 pad;
};

/* Two places per bucket (enum set_hash): array values are 8-byte aligned,
 * one u32 per value would waste half. */
struct set_bucket {
	__u32 slot[SET_WAYS]; /* tag and slot in pdr_sets, 0 for none */
};

/* A buffer's state, written by the control plane through mmap. Each packet
 * the data path hands over adds one to state; the control plane releases
 * the buffer by setting BUFFER_RELEASED with a compare-and-swap that only
 * succeeds when state equals the number of packets it has received, so no
 * packet is still on its way when the FAR starts forwarding: the buffered
 * ones leave first, in order. */
struct buffer {
	__u64 state;   /* packets handed over | BUFFER_RELEASED */
	__u64 dropped; /* packets the ring had no room for, or too long */
};

/* A buffered downlink frame as received, in the buffered_packets ring. */
struct buffered_packet {
	__u32 buffer; /* slot in buffers */
	__u32 iface;  /* counter slot of the interface it came in on */
	__u16 len;
	__u16 pdr; /* PDR ID and QFI, for the Downlink Data Report */
	__u8 qfi;
	__u8 pad[3];
	__u8 frame[BUFFERED_FRAME_MAX];
};

/* XDP metadata of a frame the control plane sends back through the program
 * (BPF_PROG_TEST_RUN) to release it from its buffer: the program forwards it
 * and writes where to. */
struct release_meta {
	__u32 magic; /* RELEASE_MAGIC */
	__u32 ifindex; /* out: the interface the frame is redirected to */
};

/* The endpoints of the GTP-U/UDP/IPv6 tunnels to one peer (FAR_GTPU_IPV6)
 * as the tunnel's IPv6 header holds them (source, then destination): 32
 * bytes would not fit in the FAR, whose copy fills the PDR's line. The
 * FAR's next hop is the peer's own slot, so the same slot finds them: no
 * lookup of a slot of their own, and their entry lives as long as the next
 * hop's. With their sum (32-bit words in memory order, as csum_to_end
 * sums), which the pseudo-header of every datagram repeats: a packet
 * copies four words and adds one sum (tunnel6_headers). */
struct tunnel6_header {
	__u8 addrs[32];
	__u64 addrs_sum;
};

/* A FAR's Duplicating Parameters as the packets of one of its PDRs see
 * them (dupls, by the PDR's slot): where the copies go and the tunnel
 * they go in. The copy is the IP packet the PDR matched, its outer
 * headers removed and before the FAR changed it. */
struct dupl {
	__u8 flags; /* FAR_GTPU_IPV4: into a GTP-U/UDP/IPv4 tunnel; 0: plain */
	__u8 tos;   /* the tunnel's outer IPv4 ToS */
	__u16 pad;
	__be32 teid;
	__be32 peer;
	__be32 local;
	__u32 nexthop; /* slot in nexthops, or NEXTHOP_ROUTE: the copy's own destination's */
};

/* The IP packet a PDR matched, for its copy: where it lies in the frame,
 * and its TTL (hop limit) and IPv4 checksum as they were before the
 * forwarding changed them. */
struct copied_packet {
	__u16 inner_off;
	__u16 inner_len;
	__u16 check;
	__u8 ttl;
	__u8 pad;
};

/* XDP metadata of a frame broadcast through a dupl_fanouts devmap, for
 * xdp_dupl_copy: the packet to copy, and the PDR's Duplicating Parameters
 * as xdp_upf found them, so that the copy looks neither them nor its
 * route up again. 32 bytes, all the metadata XDP allows. */
struct dupl_meta {
	__u32 magic; /* DUPL_MAGIC */
	struct copied_packet packet;
	struct dupl dupl; /* its nexthop resolved: never NEXTHOP_ROUTE */
};

/* XDP metadata of a frame broadcast through a dupl_fanouts devmap for the
 * copy a mirroring rule of the chain asks for, for xdp_dupl_copy: the
 * packet to copy, and where the copy goes. The classify stage's
 * chain_mirror_request stays where it was, its magic overwritten by the
 * frame's interface, the rest goes before it. */
struct mirror_meta {
	__u32 magic; /* MIRROR_MAGIC */
	struct copied_packet packet;
	/* The frame's interface, then the copy's: in memory, the key of
	 * their fanout. */
	__u32 egress;
	struct chain_mirror mirror;
};

struct nexthop {
	__u32 ifindex;
	__be16 vlan_tci; /* 0: untagged */
	__u8 dmac[ETH_ALEN];
	__u8 smac[ETH_ALEN];
	__u8 valid;
	__u8 pad;
};

struct iface {
	__u32 ifindex; /* 0: slot free */
	char name[16];
};

/* Next-hop values (enum route_value) of four consecutive /24s or addresses
 * (array values are 8-byte aligned: one u16 per element would waste three
 * quarters). */
struct route_quad {
	__u16 slot[4];
};

struct route4_key {
	__u32 prefixlen;
	__be32 addr;
};

struct route6_key {
	__u32 prefixlen;
	__u8 addr[16];
};

#endif

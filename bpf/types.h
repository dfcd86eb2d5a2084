/* Data shared between the XDP programs and the Go control plane (bpf2go
 * generates the Go side of every struct here). */
#ifndef XDP5G_TYPES_H
#define XDP5G_TYPES_H

#include "common.h"

#define MAX_IFACES 64
#define PDRS_PER_KEY 8
#define MAX_N3_ADDRS 4
#define QERS_PER_PDR 2 /* free5GC sends a session QER and a flow QER */
#define URRS_PER_PDR 2
#define SDF_PER_PDR 4

/* Where a packet ended, counted per interface: the names are the Go
 * constants' names too, so keep both lists in this order. */
enum reason {
	REASON_UPLINK_FORWARD,
	REASON_DOWNLINK_FORWARD,
	REASON_ECHO_RESPONSE,
	REASON_DROP_MALFORMED,
	REASON_DROP_UNKNOWN_TEID,
	REASON_DROP_NO_PDR,
	REASON_DROP_FAR,
	REASON_DROP_NO_NEXTHOP,
	REASON_DROP_TTL,
	REASON_DROP_INTERNAL,
	REASON_DROP_QER_GATE,
	REASON_DROP_QER_MBR,
	REASON_DROP_URR_QUOTA,
	REASON_BUFFERED,
	REASON_DROP_BUFFER_FULL,
	REASON_PASS_NOT_IP,
	REASON_PASS_NOT_OURS,
	REASON_PASS_GTP_SIGNALLING,
	REASON_PASS_FRAGMENT,
	REASON_PASS_NO_ROUTE,
	REASON_PASS_TTL,
	REASON_RELAY_FORWARD, /* GTP-U to GTP-U, between the gNB and the CP function */
	REASON_COUNT,
};

struct counter {
	__u64 packets;
	__u64 bytes;
};

/* Counts a packet of len bytes at key of a map of struct counter, per
 * CPU or only ever written by one. */
INLINE void count_packet(void *map, const void *key, __u64 len)
{
	struct counter *c = bpf_map_lookup_elem(map, key);
	if (c) {
		c->packets++;
		c->bytes += len;
	}
}

enum iface_role {
	ROLE_ACCESS = 1, /* N3: GTP-U in, uplink */
	ROLE_CORE = 2,   /* N6: plain IP in, downlink */
};

enum pdr_flags {
	PDR_MATCH_UE_V4 = 1, /* uplink: inner source is ue[0] */
	PDR_MATCH_UE_V6 = 2, /* uplink: inner source is in the /64 ue[0..1] */
	PDR_MATCH_QFI = 4,   /* uplink: PDU Session Container QFI equals qfi */
	PDR_MARK_QFI = 8,    /* downlink: add a PDU Session Container with qfi */
	PDR_MARK_RQI = 16,   /* downlink: set the container's RQI (reflective QoS) */
	/* found by TEID, yet going to the UE: from the CP function (N4-u), or
	 * from the source gNB to the target one (indirect data forwarding) */
	PDR_TO_UE = 32,
	/* << n: urr[n] measures before QoS enforcement (MBQE): it counts what
	 * the QERs and the FAR then drop too. */
	PDR_URR_BEFORE_QOS = 64,
};
_Static_assert(URRS_PER_PDR <= 2, "a PDR flag for each URR measuring before QoS enforcement");

enum far_action {
	FAR_DROP = 0, /* an unused slot drops */
	FAR_FORWARD = 1,
	/* Downlink packets go to the control plane's buffer (far.buffer)
	 * until it releases the buffer; then the FAR forwards. */
	FAR_BUFFER = 2,
};

enum far_flags {
	FAR_GTPU_IPV4 = 1, /* outer header creation GTP-U/UDP/IPv4 */
};

#define NEXTHOP_ROUTE 0xffffffff /* look the inner destination up in the routes */
#define KERNEL_SLOT 0 /* next-hop slot never valid: the kernel forwards */

struct far {
	__u8 action; /* enum far_action */
	__u8 flags;  /* enum far_flags */
	__u8 tos;    /* outer IPv4 ToS: DSCP << 2 (Transport Level Marking) */
	__u8 pad;
	__be32 teid;  /* outer TEID */
	__be32 peer;  /* outer destination */
	__be32 local; /* outer source: our N3 address */
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
	__u32 ue[4]; /* network order */
	__u32 qer[QERS_PER_PDR]; /* slots in qers, every one applies; 0: none */
	__u32 urr[URRS_PER_PDR]; /* slots in urrs, every one counts; 0: none */
	__u32 sdf; /* slot in sdf_sets: one of its filters must match; 0: none */
};
_Static_assert(sizeof(struct pdr) == 64, "a PDR fills one cache line");

enum sdf_flags {
	SDF_IPV4 = 1,  /* the prefixes are IPv4: IPv6 packets never match */
	SDF_IPV6 = 2,  /* and the other way round; neither: any address */
	SDF_PORTS = 4, /* port ranges apply: packets without ports never match */
};

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

enum qer_dir {
	QER_UL = 0,
	QER_DL = 1,
};

/* A token bucket: a QER's in one direction, a slice's on one CPU. Tokens
 * are in nanobytes (bytes × 10^9), so that a refill is elapsed ns ×
 * bytes/s, without a division. */
struct token_bucket {
	__u64 rate;   /* bytes per second; 0: no maximum bit rate */
	__u64 burst;  /* bucket size, nanobytes */
	__u64 tokens; /* nanobytes */
	__u64 last;   /* bpf_ktime_get_coarse_ns() of the last refill */
};

/* A QoS Enforcement Rule: gate and maximum bit rate per direction, shared
 * by every PDR that names it and updated under the lock from every CPU. */
struct qer {
	struct bpf_spin_lock lock;
	__u32 gate_closed; /* bit QER_UL, bit QER_DL */
	struct token_bucket bucket[2];
};

/* Indexes of a URR's counters and limits. */
enum urr_index {
	URR_TOTAL = 0,
	URR_UL = 1,
	URR_DL = 2,
};

enum urr_flags {
	URR_NOTIFY_START = 1, /* an event on the next packet; cleared by the packet that sends it */
	/* << index: the quota's event is sent; cleared when the control plane
	 * writes the limits, so that a quota is reported once. */
	URR_QUOTA_REPORTED = 2,
};

/* A Usage Reporting Rule: what the packets of its PDRs amount to, shared by
 * every CPU and counted with atomic adds, no lock. The control plane writes
 * the limits and reads the counters through mmap. */
struct urr {
	__u64 bytes[3];     /* by enum urr_index: inner IP packet octets since reset */
	__u64 packets[3];
	__u64 threshold[3]; /* bytes; the packet that reaches one sends an event; 0: none */
	__u64 quota[3];     /* bytes; a packet that would exceed one is dropped; 0: none */
	__u64 first_packet; /* bpf_ktime_get_coarse_ns() of the first counted packet; 0: none yet */
	__u64 last_packet;
	__u64 flags; /* enum urr_flags; 64 bits: 32-bit atomics need -mcpu=v3 */
};

enum urr_event_kind {
	URR_EVENT_THRESHOLD = 1,
	URR_EVENT_QUOTA = 2, /* reached, or first exceeded by a dropped packet */
	URR_EVENT_START = 3,
};

/* What urr_events carries: the control plane reads the URR's counters. */
struct urr_event {
	__u32 slot; /* in urrs */
	__u32 kind; /* enum urr_event_kind */
};

/* What a PDR set is found by. */
enum set_kind {
	SET_TEID = 1, /* uplink: TEID, network order */
	SET_UE4 = 2,  /* downlink: UE IPv4 address, network order */
	SET_UE6 = 3,  /* downlink: UE IPv6 /64 prefix, network order */
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

/* Key of set_overflow, the sets whose index places were taken. */
struct set_key {
	__u64 key;
	__u32 kind;
	__u32 pad;
};

/* A key's bucket in set_index is the top index_bits bits of h * SET_HASH,
 * where h = (key + kind << 56) * SET_HASH folded (h ^ h >> 32): one
 * multiplication alone piles byte-swapped sequential TEIDs and addresses
 * into few buckets. Its set is in one of the bucket's places or in
 * set_overflow, which holds keys of full buckets only: when a place frees
 * up, a key of its bucket in set_overflow moves into it. A place holds
 * the set's slot in its low set_slot_bits bits and, above them, the key's
 * tag: the top bits of the 32 bits of h below the bucket's, so that a
 * packet reads only the set of a place whose tag is its key's. */
#define SET_HASH 0x9e3779b97f4a7c15ULL
#define SET_WAYS 2

/* Two places per bucket: array values are 8-byte aligned, one u32 per
 * value would waste half. */
struct set_bucket {
	__u32 slot[SET_WAYS]; /* tag and slot in pdr_sets, 0 for none */
};

/* A buffer's state, written by the control plane through mmap. Each packet
 * the data path hands over adds one to state; the control plane releases
 * the buffer by setting BUFFER_RELEASED with a compare-and-swap that only
 * succeeds when state equals the number of packets it has received, so no
 * packet is still on its way when the FAR starts forwarding: the buffered
 * ones leave first, in order. */
#define BUFFER_RELEASED (1ULL << 63)

struct buffer {
	__u64 state;   /* packets handed over | BUFFER_RELEASED */
	__u64 dropped; /* packets the ring had no room for, or too long */
};

#define BUFFERED_FRAME_MAX 2048 /* a power of 2; frames are shorter */

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
#define RELEASE_MAGIC 0x78356272 /* "rb5x" */

struct release_meta {
	__u32 magic;
	__u32 ifindex; /* out: the interface the frame is redirected to */
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

/* A routes4_tbl24 value is a next-hop slot below ROUTE_GROUP; ROUTE_GROUP | g
 * sends the /24 to group g of routes4_tbl8 (longer routes lie inside it);
 * ROUTE_LPM (groups exhausted) to the routes4 trie. */
#define ROUTE_GROUP 0x8000
#define ROUTE_LPM 0xffff
#define ROUTE_GROUPS 8192

/* Next-hop values of four consecutive /24s or addresses (array values are
 * 8-byte aligned: one u16 per element would waste three quarters). */
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

/* Classification of nested traffic (internal/classify): what the parser
 * takes out of a packet. Every number is big-endian as on the wire, IPv4
 * addresses are written as ::ffff:a.b.c.d; the Go side (classify.Fields)
 * names each field at its offset. */
#define CLASSIFY_MAX_TUNNELS 4

enum tunnel_type {
	TUNNEL_NONE,
	TUNNEL_VXLAN,
	TUNNEL_GENEVE,
	TUNNEL_GRE,
	TUNNEL_GTPU,
};

struct classify_key {
	__u8 tunnels;                              /* levels seen */
	__u8 tunnel_type[CLASSIFY_MAX_TUNNELS];    /* outermost first */
	__u8 proto;                                /* of the innermost IP header */
	__u8 dscp;                                 /* of the innermost IP header */
	__u8 qfi;                                  /* of the innermost GTP-U */
	__be32 tunnel_id[CLASSIFY_MAX_TUNNELS];    /* VNI, GRE key or TEID */
	__u8 outer_src[16], outer_dst[16];         /* the outermost IP header */
	__u8 inner_src[16], inner_dst[16];         /* the innermost IP header */
	__be16 src_port, dst_port;                 /* UDP, TCP, SCTP; ICMP type and code */
	__be32 rtp_ssrc;
	__u8 rtp_payload_type;
	__u8 nal_type, layer_id, temporal_id;      /* H.265 (RFC 7798) */
	__u8 rtp, h265;                            /* 1: recognised */
	__u8 pad[2];
};

/* The parser's walk through a packet, one step per header group. */
enum classify_next {
	CLASSIFY_NEXT_ETH,  /* an Ethernet header */
	CLASSIFY_NEXT_IP,   /* an IPv4 or IPv6 header */
	CLASSIFY_NEXT_DONE,
};

/* A fragmented IP packet: all its fragments get the verdict of the first. */
struct classify_frag_id {
	__u8 src[16], dst[16]; /* IPv4 as ::ffff:a.b.c.d */
	__be32 id;             /* the IPv4 Identification, or the IPv6 Fragment header's */
	__u8 proto;            /* IPv4's protocol; 0 for IPv6 */
	__u8 pad[3];
};

struct classify_state {
	struct classify_key key;
	__u32 off;  /* of the next header */
	__u8 next;  /* enum classify_next */
	__u8 ips;   /* IP headers seen */
	__u8 frag;  /* 1: a fragment other than the first ended the walk */
	__u8 first; /* 1: the packet is the first fragment of a fragmented one */
	__u32 rule; /* the slot of the rule that matched; 0: none */
	struct classify_frag_id frag_id; /* of the outermost fragmented header */
};

/* The rules, as a tuple space: per distinct mask, an exact-match table of
 * masked keys. There are two halves of it; packets use the one the epoch's
 * low bit names while the control plane writes the other. */
#define CLASSIFY_MAX_MASKS 32
#define CLASSIFY_MAX_RULES 65536

enum classify_action {
	CLASSIFY_NONE, /* no rule matched */
	CLASSIFY_DROP,
	CLASSIFY_PASS,
	CLASSIFY_MIRROR,
	CLASSIFY_REDIRECT,
	CLASSIFY_STEER,
	CLASSIFY_COUNT,
};

/* Where a rule that redirects sends packets, or one that mirrors their
 * copies: out of an interface, with the outermost Ethernet header's
 * addresses rewritten; or the slice whose CPUs a rule that steers sends
 * them to. */
struct classify_egress {
	__u32 ifindex;
	__u8 dst[6];
	__u8 src[6];
	__u32 slice;
};

#define CLASSIFY_MAX_SLICES 256
/* A slice's flows spread over its CPUs by the hash of the innermost flow
 * and the tunnel ids: bucket (hash % SLICE_BUCKETS) to CPU. */
#define SLICE_BUCKETS 64
struct slice {
	__u32 cpus[SLICE_BUCKETS];
	__u32 prioritised; /* 1: its flows leave the host only when even they cannot be served */
	__u32 pad;
	/* Bytes per second each receiving CPU lets through, 0: no limit, and
	 * the bucket size in nanobytes (struct token_bucket). */
	__u64 rate, burst;
};

/* A CPU's queue of steered packets: sent to it, taken off it by
 * xdp_slice_cpu, and dropped because it was full (from the CPU map's
 * tracepoint). What is in it is the difference. */
struct cpu_load {
	__u64 enqueued;
	__u64 dequeued;
	__u64 dropped;
};

/* A prioritised flow (the paper's prio-map): the CPU it stays on and what
 * it sent. */
struct prio_flow {
	__u32 active;
	__u32 cpu;
	struct counter stats;
};

/* Where a flow's packets go: to an alternative node or not, since when. */
struct flow_route {
	__u64 since; /* bpf_ktime_get_coarse_ns() */
	__u32 offloaded;
	__u32 pad;
};

/* An alternative node for the flows the host cannot take: its MAC and
 * address, out of the port packets came in on (ifindex 0) or out of
 * another. It takes packets whose outer header is of its address's
 * family. */
struct alt_node {
	__u8 mac[6];
	__u8 ipv6;     /* 1: addr is IPv6; 0: IPv4, in its first four octets */
	__u8 pad;
	__u32 ifindex;
	__u8 addr[16];
};

#define ALT_MAX 16
struct alt_nodes {
	__u32 n;
	__u32 pad;
	struct alt_node node[ALT_MAX];
};

/* What xdp_classify leaves in the metadata of a packet it steers, for
 * xdp_slice_cpu on the CPU it goes to. */
#define SLICE_META_MAGIC 0x736c6963 /* "slic" */
struct slice_meta {
	__u32 magic;
	__u32 slice;
	__u32 hash;
};

/* What xdp_classify leaves in a packet's metadata for tc_classify_mirror:
 * the slot of the rule that mirrors it. */
#define CLASSIFY_MIRROR_MAGIC 0x6d697272 /* "mirr" */
struct classify_mirror_meta {
	__u32 magic;
	__u32 rule;
};

/* Where a masked key leads: the best rule with that mask and value. */
struct classify_verdict {
	__u32 rule;     /* slot, 1 to CLASSIFY_MAX_RULES: its counters */
	__u32 priority; /* the highest wins */
	__u32 order;    /* of equal priorities, the lowest wins: added first */
	__u8 action;    /* enum classify_action */
	__u8 pad[3];
};

struct classify_mask {
	struct classify_key mask;
	__u32 max_priority; /* of the rules under the mask */
};

struct classify_half {
	struct classify_mask masks[CLASSIFY_MAX_MASKS];
	/* The n slots in use, highest max_priority first: a search ends at
	 * the first mask whose rules cannot beat the verdict it holds. */
	__u8 order[CLASSIFY_MAX_MASKS];
	__u32 n;
};

struct classify_entry_key {
	__u16 half;
	__u16 mask; /* its slot in the half's masks */
	__u32 pad;
	struct classify_key value; /* the packet's key under the mask */
};

/* The flow cache: a key's verdict, valid in the epoch it was found in. */
struct classify_cached {
	__u32 epoch;
	struct classify_verdict verdict;
};

#endif

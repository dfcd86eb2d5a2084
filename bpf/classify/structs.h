/* What the classifier's and steering's maps and metadata hold, shared with
 * the Go control plane (bpf2go generates the Go side of each struct). */
#ifndef XDP5G_CLASSIFY_STRUCTS_H
#define XDP5G_CLASSIFY_STRUCTS_H

#include "../lib/chain.h"
#include "../lib/counter.h"
#include "consts.h"

/* What the parser takes out of a packet. Every number is big-endian as on
 * the wire, IPv4 addresses are written as ::ffff:a.b.c.d; the Go side
 * (classifyxdp.Fields) names each field at its offset. */
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
	__u32 rule; /* the slot of the last rule the packet met; 0: none */
	struct classify_frag_id frag_id; /* of the outermost fragmented header; only when frag or first */
	/* The chain_iface slot and slice of the packet's interface, which the
	 * classify stage found for the steer stage after it. */
	__u32 chain_slot;
	__u32 chain_slice;
	struct chain_handoff outer; /* the outermost headers, for a chain's UPF stage */
} __attribute__((aligned(8))); /* cleared and written by the word, not by the half */

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

/* Where a masked key leads: a rule with that mask and value. */
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

/* The rules' masks. There are two halves of the rules; packets use the one
 * the epoch's low bit names while the control plane writes the other. */
struct classify_half {
	struct classify_mask masks[CLASSIFY_MAX_MASKS];
	/* The n slots in use, highest max_priority first: a search ends at
	 * the first mask whose rules cannot beat the verdict it holds. */
	__u8 order[CLASSIFY_MAX_MASKS];
	__u32 n;
};

/* The rules of one mask and masked value, best first, are entries of
 * levels 0, 1, ...: down to the first that decides (not count nor
 * mirror), CLASSIFY_MAX_CHAIN at most. Level 0 is the best; the next
 * levels serve the search for the rule a count or mirror rule hands a
 * packet on to. */
struct classify_entry_key {
	__u16 half;
	__u16 mask; /* its slot in the half's masks */
	__u32 level;
	struct classify_key value; /* the packet's key under the mask */
};

/* The rules a packet meets, in order: count and mirror rules, each handing
 * it on to the best rule below, up to the one that decides; rule 0 past
 * the last. */
struct classify_outcome {
	__u32 rule[CLASSIFY_MAX_CHAIN];  /* slots */
	__u8 action[CLASSIFY_MAX_CHAIN]; /* enum classify_action */
};

/* The flow cache's key of a packet whose addresses are all IPv4: its
 * classify_key without the four addresses' ::ffff: prefixes, 56 octets of
 * 104. A lookup hashes and compares the whole key: the shorter, the
 * cheaper. */
struct classify_key4 {
	__u8 head[__builtin_offsetof(struct classify_key, outer_src)];
	__be32 addr[4]; /* outer_src, outer_dst, inner_src, inner_dst */
	__u8 tail[sizeof(struct classify_key) - __builtin_offsetof(struct classify_key, src_port)];
};

_Static_assert(__builtin_offsetof(struct classify_key, outer_src) % 8 == 0 &&
		       __builtin_offsetof(struct classify_key, outer_dst) == __builtin_offsetof(struct classify_key, outer_src) + 16 &&
		       __builtin_offsetof(struct classify_key, inner_src) == __builtin_offsetof(struct classify_key, outer_src) + 32 &&
		       __builtin_offsetof(struct classify_key, inner_dst) == __builtin_offsetof(struct classify_key, outer_src) + 48 &&
		       __builtin_offsetof(struct classify_key, src_port) == __builtin_offsetof(struct classify_key, outer_src) + 64,
	       "the four addresses lie together, 8-aligned, before the ports");

/* The flow cache: a key's outcome, valid in the epoch it was found in. */
struct classify_cached {
	__u32 epoch;
	struct classify_outcome outcome;
};

/* What xdp_classify leaves in the metadata of a packet that rules mirror,
 * for tc_classify_mirror (behind steering's, when the packet is steered):
 * the slots of the mirroring rules, a copy each, and the rule below them
 * that drops or redirects the packet, which XDP, sending it to TC for the
 * copies, left to TC. */
struct classify_mirror_meta {
	__u32 magic;                           /* CLASSIFY_MIRROR_MAGIC */
	__u32 mirror[CLASSIFY_MAX_CHAIN];      /* by place in the outcome; 0: not a mirroring rule */
	__u32 then;                            /* a drop or redirect rule's slot; 0: none */
	__u8 then_action;                      /* its action */
	__u8 pad[3];
};

/* A slice: its CPU per hash bucket. */
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

struct alt_nodes {
	__u32 n;
	__u32 pad;
	struct alt_node node[ALT_MAX];
};

/* What xdp_classify leaves in the metadata of a packet it steers, for
 * xdp_slice_cpu on the CPU it goes to. */
struct slice_meta {
	__u32 magic; /* SLICE_META_MAGIC */
	__u32 hash;
	__u16 slice;
	__u16 next; /* a chain's interface slot + 1: the stage to run there; 0: none */
};

#endif

/* Stages chained on one interface: classify, steer and upf, always in that
 * order, each a program of its own, loaded once. An interface with one
 * stage runs that stage's program alone; with more, the first configured
 * stage is the interface's XDP program and each stage goes on by a tail
 * call into the first later stage chain_stages holds for the interface: a
 * stage is added or removed by writing or deleting its slot there (or, for
 * the first, by replacing the attached program), one atomic update each.
 * A stage not configured costs a tail call that fails (a few
 * instructions: its jump is a no-op while the place is empty). Programs
 * of the CPU-map hook cannot tail-call into a program array owned by
 * plain XDP programs: the stages that run on the CPU a packet was
 * steered to are the CPU-map variants in chain_cpu_stages. Shared by
 * the UPF's and the classifier's objects (the loaders hand one object's
 * maps to the other), so every map is pinned by name with the UPF's. */
#ifndef XDP5G_CHAIN_H
#define XDP5G_CHAIN_H

#include "common.h"
#include "parser.h"

enum chain_stage {
	STAGE_CLASSIFY,
	STAGE_STEER,
	STAGE_UPF,
	STAGE_COUNT,
};

enum chain_limits {
	CHAIN_IFACES = 64,   /* interfaces with a chain: the UPF's interface slots */
	CHAIN_PLACES = 4096, /* of chain_ifaces, a power of 2 */
};

/* An interface that runs a chain: its slot, whose STAGE_COUNT places in
 * chain_stages hold its stages and whose place in chain_cpu_stages its
 * stage after steering; the slice its steer stage sends packets to. */
struct chain_iface {
	__u32 ifindex; /* 0: the place is free */
	__u32 slot;
	__u32 slice;
};

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, CHAIN_IFACES * STAGE_COUNT);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} chain_stages SEC(".maps");

/* By slot: the UPF stage's CPU-map variant, run where steering sent a
 * packet. */
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, CHAIN_IFACES);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} chain_cpu_stages SEC(".maps");

/* The interfaces that run a chain of more than one stage, each at its
 * ifindex modulo CHAIN_PLACES: an array's read costs a few ns where a
 * hash table's cost 8 to 10 more, in every stage. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct chain_iface);
	__uint(max_entries, CHAIN_PLACES);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} chain_ifaces SEC(".maps");

/* The chain of the interface a packet came in on; NULL when it has none. */
INLINE struct chain_iface *chain_of(struct xdp_md *ctx)
{
	__u32 ifindex = ctx->ingress_ifindex, place = ifindex & (CHAIN_PLACES - 1);
	struct chain_iface *c = bpf_map_lookup_elem(&chain_ifaces, &place);
	return c && c->ifindex == ifindex ? c : NULL;
}

/* A tail call's index that the verifier knows is a direct jump the JIT
 * patches when the program array's entry changes; an index it learns
 * only at run time is an indirect jump, through a retpoline on CPUs that
 * need one (about 19 ns a packet in the chain's benchmarks).
 * CHAIN_EACH_SLOT(f) is f(n) for every slot n, a constant: the cases of
 * a switch over a slot (a few compares) that tail-call with constant
 * indexes. */
_Static_assert(CHAIN_IFACES == 64, "CHAIN_EACH_SLOT names every slot");
#define CHAIN_SLOTS4(f, n) f(n) f(n + 1) f(n + 2) f(n + 3)
#define CHAIN_SLOTS16(f, n) CHAIN_SLOTS4(f, n) CHAIN_SLOTS4(f, n + 4) CHAIN_SLOTS4(f, n + 8) CHAIN_SLOTS4(f, n + 12)
#define CHAIN_EACH_SLOT(f) CHAIN_SLOTS16(f, 0) CHAIN_SLOTS16(f, 16) CHAIN_SLOTS16(f, 32) CHAIN_SLOTS16(f, 48)

/* chain_next for the slot, a constant. */
INLINE void chain_next_in(struct xdp_md *ctx, const __u32 slot, const enum chain_stage after)
{
#pragma unroll
	for (int s = after + 1; s < STAGE_COUNT; s++)
		bpf_tail_call_static(ctx, &chain_stages, slot * STAGE_COUNT + s);
}

/* Goes on to the first stage after `after` that the interface in slot
 * runs; returns only when there is none. */
INLINE void chain_next(struct xdp_md *ctx, __u32 slot, const enum chain_stage after)
{
#define CHAIN_NEXT(n)                         \
	case n:                               \
		chain_next_in(ctx, n, after); \
		return;
	switch (slot) {
		CHAIN_EACH_SLOT(CHAIN_NEXT)
	}
#undef CHAIN_NEXT
}

/* What the classify stage leaves in the metadata of a packet that a
 * mirroring rule met, for the UPF stage: where the copy goes (the best
 * mirroring rule's interface) and its Ethernet addresses. */
struct chain_mirror {
	__u32 ifindex;
	__u8 dst[ETH_ALEN];
	__u8 src[ETH_ALEN];
};

enum chain_magic {
	CHAIN_MIRROR_MAGIC = 0x636d6972, /* "cmir" */
};

/* The request for a copy in a packet's metadata: a chain_mirror behind a
 * magic, so that no other metadata (a live test run's recycled frame may
 * carry what its last receiver left) is taken for one. Steering's
 * metadata goes before it on the way to another CPU: 12 and 20 bytes, the
 * 32 XDP allows. */
struct chain_mirror_request {
	__u32 magic; /* CHAIN_MIRROR_MAGIC */
	struct chain_mirror mirror;
};

/* The copy a packet asks for, NULL for none: its metadata is exactly a
 * chain_mirror_request (the UPF's own metadata, the release of a
 * buffered frame's, is shorter). */
INLINE struct chain_mirror_request *chain_mirror_of(struct xdp_md *ctx)
{
	struct chain_mirror_request *m;
	/* Bounds first: the verifier learns none from an equality. */
	if (!read_meta(ctx, m) || m->magic != CHAIN_MIRROR_MAGIC || (void *)(m + 1) != (void *)(long)ctx->data)
		return NULL;
	return m;
}

/* A GTP-U message the classify stage's walk parsed whole in a packet's
 * outermost UDP datagram: parse_gtpu's result, which the UPF stage takes
 * in place of parsing the message again. */
struct chain_gtpu {
	__u16 off;         /* of its header from the packet's start; 0: none */
	__u16 hdr_len;     /* header, optional fields and extension chain */
	__u32 payload_len; /* bytes after hdr_len */
	__be16 seq;        /* 0 when the S flag is clear */
	__u16 psc_qfi;     /* the PDU Session Container's QFI | 0x100; 0: none */
};

/* What the classify stage's walk found of a packet's outermost headers
 * that the UPF stage parses: the IP header as parse_eth and parse_ipv4
 * (parse_ipv6) would have it, and the GTP-U message in its UDP datagram.
 * The classify stage hands it to the later stages on its CPU right before
 * the tail call, for a frame the UPF does not read at fixed offsets
 * (chain_unhanded); the UPF stage behind it claims it, and it
 * is cleared wherever the packet's run on the CPU ends without the UPF
 * stage, so that no other packet meets it. The interface and length tell
 * the packet besides: a test run, which the kernel may interrupt for a
 * packet from the wire, is not alone on its CPU. A packet steered to
 * another CPU finds none there and is parsed there. */
struct chain_handoff {
	__u32 ifindex; /* the packet's interface; 0: none, or claimed */
	__u32 len;     /* its length */
	/* Its IP header's offset: behind Ethernet with one VLAN tag at most,
	 * the whole packet inside the frame; 0: none. */
	__u16 l3_off;
	__be16 proto; /* ETH_P_IP or ETH_P_IPV6: the EtherType and the header's version */
	struct chain_gtpu gtpu;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct chain_handoff);
	__uint(max_entries, 1);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} chain_handoffs SEC(".maps");

INLINE struct chain_handoff *chain_handoff_here(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&chain_handoffs, &zero);
}

/* Keeps the message g whose header is at off for the UPF stage. */
INLINE void chain_keep_gtpu(struct chain_gtpu *o, __u32 off, const struct gtpu_info *g)
{
	o->off = off;
	o->hdr_len = g->hdr_len;
	o->payload_len = g->payload_len;
	o->seq = g->seq;
	o->psc_qfi = g->has_qfi ? 0x100 | g->qfi : 0;
}

/* Whether the IP header at ip (IPv6 when v6, a constant), with the UDP
 * header after it within bounds, is of the shape the UPF reads at fixed
 * offsets (fast_gpdu in the UPF): IPv4 without options or fragmentation,
 * or IPv6 with UDP as its next header, and UDP to the GTP-U port. */
INLINE int gpdu_shaped(void *ip, const int v6)
{
	struct udphdr *udp;
	if (v6) {
		struct ipv6hdr *ip6 = ip;
		if ((*(__u8 *)ip6 >> 4) != 6 || ip6->nexthdr != IPPROTO_UDP)
			return 0;
		udp = (void *)(ip6 + 1);
	} else {
		struct iphdr *ip4 = ip;
		/* Version 4 and IHL 5 in one octet. */
		if (*(__u8 *)ip4 != 0x45 || ipv4_is_fragment(ip4) || ip4->protocol != IPPROTO_UDP)
			return 0;
		udp = (void *)(ip4 + 1);
	}
	return udp->dest == bpf_htons(GTPU_PORT);
}

/* Whether the classify stage hands nothing on for the frame between data
 * and end: untagged Ethernet and the UPF's fixed-offset shape. The UPF
 * stage reads such a frame at fixed offsets and parses itself the few that
 * reading declines; for the common G-PDU the handoff was a per-CPU lookup
 * and a copy in one stage and a lookup and a claim in the other, for
 * nothing. The handoff is clear whenever no packet is between the two
 * stages, so neither stage touches it for such a frame. */
INLINE int chain_unhanded(void *data, void *end)
{
	void *ip = data + ETH_HLEN;
	if (ip > end)
		return 0;
	/* The EtherType in one load (struct ethhdr is packed: its field is
	 * read by octets). */
	__be16 proto = *(__be16 *)(data + __builtin_offsetof(struct ethhdr, h_proto));
	if (proto == bpf_htons(ETH_P_IP))
		return ip + sizeof(struct iphdr) + sizeof(struct udphdr) <= end && gpdu_shaped(ip, 0);
	if (proto == bpf_htons(ETH_P_IPV6))
		return ip + sizeof(struct ipv6hdr) + sizeof(struct udphdr) <= end && gpdu_shaped(ip, 1);
	return 0;
}

/* Hands what the walk found (none when walked->l3_off is 0) on to the
 * later stages on this CPU. */
INLINE void chain_hand(struct xdp_md *ctx, const struct chain_handoff *walked)
{
	struct chain_handoff *h = chain_handoff_here();
	if (!h)
		return;
	if (!walked->l3_off) {
		h->ifindex = 0;
		return;
	}
	*h = *walked;
	h->len = ctx->data_end - ctx->data;
	h->ifindex = ctx->ingress_ifindex;
}

/* Clears what the classify stage handed on: no later stage took it. */
INLINE void chain_drop_handoff(void)
{
	struct chain_handoff *h = chain_handoff_here();
	if (h)
		h->ifindex = 0;
}

/* What the classify stage handed on of the packet the UPF stage starts
 * on, claimed for it; NULL when it handed on none. The UPF stage reads it
 * as it goes, without holding it. */
INLINE const struct chain_handoff *chain_claim(struct xdp_md *ctx)
{
	struct chain_handoff *h = chain_handoff_here();
	if (!h || h->ifindex != ctx->ingress_ifindex || h->len != ctx->data_end - ctx->data)
		return NULL;
	h->ifindex = 0;
	return h;
}

/* The outermost IPv4 header handed on, at the cursor: parse_ipv4 without
 * the checks the walk made. */
INLINE int chain_take_ipv4(struct cursor *c, struct iphdr **iph)
{
	struct iphdr *ip = c->pos;
	if ((void *)(ip + 1) > c->end)
		return -1;
	c->pos = (void *)ip + ip->ihl * 4;
	*iph = ip;
	return 0;
}

/* The GTP-U message at the cursor, at offset off: parse_gtpu's result,
 * from the classify stage's parse of it when it handed one on (h). */
INLINE int chain_parse_gtpu(struct cursor *c, __u32 off, const struct chain_handoff *h, struct gtpu_info *g)
{
	if (!h || h->gtpu.off != off)
		return parse_gtpu(c, g);
	g->hdr = cursor_take(c, struct gtpu_hdr);
	g->seq = h->gtpu.seq;
	g->qfi = h->gtpu.psc_qfi;
	g->has_qfi = h->gtpu.psc_qfi >> 8;
	g->hdr_len = h->gtpu.hdr_len;
	g->payload_len = h->gtpu.payload_len;
	return !g->hdr;
}

/* Removes the metadata before the packet, if any: where a frame enters
 * the stages, what it came with is not theirs (a redirected frame's
 * sender's, or what the last receiver of a live test run's recycled page
 * left: that page's frame keeps its metadata's length when its data did
 * not move). */
INLINE void drop_meta(struct xdp_md *ctx)
{
	int len = (int)(ctx->data - ctx->data_meta);
	if (len > 0)
		bpf_xdp_adjust_meta(ctx, len);
}

#endif

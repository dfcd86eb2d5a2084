// SPDX-License-Identifier: GPL-2.0
/* Classification of nested multi-tenant traffic: a walk through Ethernet
 * (two VLAN tags at most), IPv4 and IPv6, up to CLASSIFY_MAX_TUNNELS levels
 * of VXLAN, GENEVE, GRE and GTP-U in any order, then the innermost UDP,
 * TCP, SCTP or ICMP header, RTP and the H.265 NAL unit header inside, fills
 * one struct classify_key; the best rule for the key gives the packet its
 * action. The walk's steps (walk_*) take a header group with the shared
 * parser (lib/parser.h) into the key and return the step that follows
 * (enum classify_next). */
#include <linux/pkt_cls.h>
#include "../lib/chain.h"
#include "../lib/geneve.h"
#include "../lib/gre.h"
#include "../lib/parser.h"
#include "../lib/rtp.h"
#include "../lib/sctp.h"
#include "../lib/vxlan.h"
#include "config.h"
#include "maps.h"
#include "steer.h"

char LICENSE[] SEC("license") = "GPL";

/* What only the Go side reads, put into BTF for bpf2go (-type in
 * internal/classify/classifyxdp/gen.go): the constants, which no map or
 * variable carries. */
const struct classify_exports {
	enum classify_limits limits;
	enum tunnel_type tunnel_type;
	enum classify_action action;
} classify_exports __attribute__((unused)) = {};

/* An IPv4 address as a key holds it, ::ffff:a.b.c.d, into an address of
 * the key, which is 8-aligned in struct classify_state and on the stack:
 * written by the word, where a memset or memcpy into a __u8 * becomes
 * byte stores. */
INLINE void set_addr4(__u8 *dst, __be32 a)
{
	*(__u64 *)dst = 0;
	*(__be32 *)(dst + 8) = bpf_htonl(0xffff);
	*(__be32 *)(dst + 12) = a;
}

/* Opens a tunnel level; 0 when the key has no room for another. */
INLINE int enter_tunnel(struct classify_key *k, enum tunnel_type type, __be32 id)
{
	__u8 t = k->tunnels;
	if (t >= CLASSIFY_MAX_TUNNELS)
		return 0;
	k->tunnel_type[t] = type;
	k->tunnel_id[t] = id;
	k->tunnels = t + 1;
	return 1;
}

INLINE __be32 vni(const __u8 *v)
{
	return bpf_htonl((__u32)v[0] << 16 | (__u32)v[1] << 8 | v[2]);
}

/* The next step for an EtherType that follows a tunnel header. */
INLINE __u8 next_of_ethertype(__be16 proto)
{
	if (proto == bpf_htons(ETH_P_TEB))
		return CLASSIFY_NEXT_ETH;
	if (proto == bpf_htons(ETH_P_IP) || proto == bpf_htons(ETH_P_IPV6))
		return CLASSIFY_NEXT_IP;
	return CLASSIFY_NEXT_DONE;
}

/* RTP in a UDP payload, and the H.265 payload header after it. */
INLINE void walk_rtp(struct cursor *c, struct classify_key *k)
{
	struct rtp_hdr *r = c->pos;
	if ((void *)(r + 1) > c->end || r->vpxcc >> 6 != RTP_VERSION ||
	    !rtp_payload_type_plausible(r->mpt & 0x7f))
		return;
	__u32 hlen = sizeof(*r) + (r->vpxcc & 0x0f) * 4;
	if (r->vpxcc & RTP_X) {
		__u8 *x = (__u8 *)r + hlen;
		if ((void *)(x + 4) > c->end)
			return;
		hlen += 4 + ((__u32)x[2] << 8 | x[3]) * 4;
	}
	if (hlen > RTP_MAX_HDR)
		return;
	__u8 *p = (__u8 *)r + hlen;
	if ((void *)p > c->end)
		return;
	k->rtp = 1;
	k->rtp_ssrc = r->ssrc;
	k->rtp_payload_type = r->mpt & 0x7f;
	if ((void *)(p + 2) > c->end || p[0] & 0x80 || !H265_TID_PLUS1(p[1]))
		return;
	__u8 type = H265_TYPE(p[0]);
	if (type == H265_FU) {
		if ((void *)(p + 3) > c->end)
			return;
		type = p[2] & 0x3f;
	} else if (type == H265_AP) {
		if ((void *)(p + 5) > c->end) /* the first unit's size, then its header */
			return;
		type = H265_TYPE(p[4]);
	}
	k->h265 = 1;
	k->nal_type = type;
	k->layer_id = H265_LAYER_ID(p[0], p[1]);
	k->temporal_id = H265_TID_PLUS1(p[1]) - 1;
}

/* UDP at offset off: a tunnel by its destination port, else the innermost
 * header, with RTP looked for in its payload. */
INLINE __u8 walk_udp(struct cursor *c, struct classify_state *st, __u32 off, enum parse_extent extent)
{
	struct classify_key *k = &st->key;
	struct udphdr *u = cursor_take(c, struct udphdr);
	if (!u)
		return CLASSIFY_NEXT_DONE;
	k->src_port = u->source;
	k->dst_port = u->dest;
	if (u->dest == bpf_htons(VXLAN_PORT)) {
		struct vxlan_hdr *v = c->pos;
		if ((void *)(v + 1) <= c->end && (v->flags & VXLAN_FLAG_I) && enter_tunnel(k, TUNNEL_VXLAN, vni(v->vni))) {
			c->pos = v + 1;
			return CLASSIFY_NEXT_ETH;
		}
	} else if (u->dest == bpf_htons(GENEVE_PORT)) {
		struct geneve_hdr *g = c->pos;
		if ((void *)(g + 1) <= c->end && !GENEVE_VERSION(g)) {
			void *payload = (void *)(g + 1) + GENEVE_OPT_LEN(g);
			__u8 next = next_of_ethertype(g->proto);
			if (payload <= c->end && next != CLASSIFY_NEXT_DONE && enter_tunnel(k, TUNNEL_GENEVE, vni(g->vni))) {
				c->pos = payload;
				return next;
			}
		}
	} else if (u->dest == bpf_htons(GTPU_PORT)) {
		struct cursor t = *c;
		struct gtpu_info g;
		int parsed = !parse_gtpu_in(&t, &g, extent);
		/* The outermost message, whole: the UPF stage's. */
		if (parsed && !k->tunnels && extent == PARSE_WHOLE)
			chain_keep_gtpu(&st->outer.gtpu, off + sizeof(*u), &g);
		if (parsed && g.hdr->type == GTPU_G_PDU && g.payload_len && enter_tunnel(k, TUNNEL_GTPU, g.hdr->teid)) {
			if (g.has_qfi)
				k->qfi = g.qfi;
			*c = t;
			return CLASSIFY_NEXT_IP;
		}
	}
	walk_rtp(c, k);
	return CLASSIFY_NEXT_DONE;
}

/* GRE: the flags' optional fields, the key as the tunnel's id. */
INLINE __u8 walk_gre(struct cursor *c, struct classify_key *k)
{
	struct gre_hdr *g = cursor_take(c, struct gre_hdr);
	if (!g || g->flags & bpf_htons(GRE_VERSION))
		return CLASSIFY_NEXT_DONE;
	__u32 opt = 0;
	__be32 key = 0;
	if (g->flags & bpf_htons(GRE_C))
		opt += 4;
	if (g->flags & bpf_htons(GRE_K)) {
		__be32 *kp = c->pos + opt;
		if ((void *)(kp + 1) > c->end)
			return CLASSIFY_NEXT_DONE;
		key = *kp;
		opt += 4;
	}
	if (g->flags & bpf_htons(GRE_S))
		opt += 4;
	__u8 next = next_of_ethertype(g->proto);
	if (c->pos + opt > c->end || next == CLASSIFY_NEXT_DONE || !enter_tunnel(k, TUNNEL_GRE, key))
		return CLASSIFY_NEXT_DONE;
	c->pos += opt;
	return next;
}

/* The ports of a TCP or SCTP header, the type and code of an ICMP one. */
INLINE void take_ports(struct cursor *c, struct classify_key *k, __u8 proto)
{
	switch (proto) {
	case IPPROTO_TCP:
	case IPPROTO_SCTP: {
		/* Both begin with the source and destination ports. */
		struct sctp_common_hdr *p = c->pos;
		if ((void *)&p->vtag <= c->end) {
			k->src_port = p->source;
			k->dst_port = p->dest;
		}
		break;
	}
	case IPPROTO_ICMP:
	case IPPROTO_ICMPV6: {
		__u8 *t = c->pos;
		if ((void *)(t + 2) <= c->end) {
			k->src_port = bpf_htons(t[0]); /* type */
			k->dst_port = bpf_htons(t[1]); /* code */
		}
		break;
	}
	}
}

/* The upper-layer header of an IP packet, at offset off. */
INLINE __u8 walk_l4(struct cursor *c, struct classify_state *st, __u32 off, __u8 proto, enum parse_extent extent)
{
	struct classify_key *k = &st->key;
	switch (proto) {
	case IPPROTO_UDP:
		return walk_udp(c, st, off, extent);
	case IPPROTO_GRE:
		return walk_gre(c, k);
	}
	take_ports(c, k, proto);
	return CLASSIFY_NEXT_DONE;
}

/* Whether an outer header was fragmented already. */
INLINE int fragmented(const struct classify_state *st)
{
	return st->first || st->frag;
}

/* Keeps where the outermost IP header lies, of EtherType proto, for a
 * chain's UPF stage: when the Ethernet header before it said so with one
 * VLAN tag at most, as the UPF parses it. */
INLINE void keep_outer_ip(struct classify_state *st, __be16 proto)
{
	if (!st->ips && st->off <= ETH_HLEN_VLAN && st->outer.proto == proto)
		st->outer.l3_off = st->off;
}

/* An IPv4 or IPv6 header, then what it carries. Inside the first fragment
 * of a fragmented packet, the headers' lengths claim more than the frame
 * holds: they are taken as they are, and the packet classified by the
 * headers the frame shows. */
INLINE __u8 walk_ip(struct cursor *c, struct classify_state *st)
{
	struct classify_key *k = &st->key;
	enum parse_extent extent = st->first ? PARSE_CUT : PARSE_WHOLE; /* as the headers outside say */
	__u8 *v = c->pos;
	__u8 proto;
	if ((void *)(v + 1) > c->end)
		return CLASSIFY_NEXT_DONE;
	if (*v >> 4 == 4) {
		struct iphdr *ip;
		if (parse_ipv4_in(c, &ip, extent))
			return CLASSIFY_NEXT_DONE;
		keep_outer_ip(st, bpf_htons(ETH_P_IP));
		if (!st->ips) {
			set_addr4(k->outer_src, ip->saddr);
			set_addr4(k->outer_dst, ip->daddr);
		}
		set_addr4(k->inner_src, ip->saddr);
		set_addr4(k->inner_dst, ip->daddr);
		k->dscp = ip->tos >> 2;
		proto = ip->protocol;
		if (ipv4_is_fragment(ip) && !fragmented(st)) {
			/* Only 4-aligned: the addresses as the key has them. */
			__builtin_memcpy(st->frag_id.src, k->inner_src, 16);
			__builtin_memcpy(st->frag_id.dst, k->inner_dst, 16);
			st->frag_id.id = (__be32)ip->id;
			st->frag_id.proto = proto;
			st->frag = !!(ip->frag_off & bpf_htons(IP_OFFSET));
			st->first = !st->frag;
		} else if (ip->frag_off & bpf_htons(IP_OFFSET)) {
			st->frag = 1; /* an inner one, inside the first fragment of an outer one */
		}
	} else {
		struct ipv6hdr *ip6;
		if (parse_ipv6_in(c, &ip6, extent))
			return CLASSIFY_NEXT_DONE;
		keep_outer_ip(st, bpf_htons(ETH_P_IPV6));
		if (!st->ips) {
			__builtin_memcpy(k->outer_src, &ip6->saddr, 16);
			__builtin_memcpy(k->outer_dst, &ip6->daddr, 16);
		}
		__builtin_memcpy(k->inner_src, &ip6->saddr, 16);
		__builtin_memcpy(k->inner_dst, &ip6->daddr, 16);
		k->dscp = ((ip6->priority << 4) | (ip6->flow_lbl[0] >> 4)) >> 2;
		proto = ip6->nexthdr;
		__u8 *fh;
		int later = parse_ipv6_ext(c, &proto, &fh) < 0;
		if (fh && !fragmented(st)) {
			__builtin_memcpy(st->frag_id.src, &ip6->saddr, 16);
			__builtin_memcpy(st->frag_id.dst, &ip6->daddr, 16);
			__builtin_memcpy(&st->frag_id.id, fh + 4, 4);
			st->first = !later;
		}
		st->frag |= later;
	}
	st->ips++;
	k->proto = proto;
	k->src_port = 0;
	k->dst_port = 0;
	if (st->frag)
		return CLASSIFY_NEXT_DONE;
	__u32 l4_off = st->off + (c->pos - (void *)v); /* the walk's steps start at st->off */
	return walk_l4(c, st, l4_off, proto, st->first ? PARSE_CUT : PARSE_WHOLE); /* this header's fragment included */
}

/* One step of the walk: the header group at st->off. A function of its own
 * so that the verifier checks it once, not once per level. */
__noinline int classify_step(struct xdp_md *ctx, struct classify_state *st)
{
	if (!ctx || !st || st->off > CLASSIFY_MAX_OFFSET)
		return 0;
	void *data = (void *)(long)ctx->data;
	struct cursor c = {data + st->off, (void *)(long)ctx->data_end};
	__u8 next = CLASSIFY_NEXT_DONE;
	if (st->next == CLASSIFY_NEXT_ETH) {
		struct ethhdr *eth;
		__be16 proto;
		if (!parse_eth_qinq(&c, &eth, &proto) &&
		    (proto == bpf_htons(ETH_P_IP) || proto == bpf_htons(ETH_P_IPV6)))
			next = CLASSIFY_NEXT_IP;
		if (!st->off) /* the outermost */
			st->outer.proto = proto;
	} else if (st->next == CLASSIFY_NEXT_IP) {
		next = walk_ip(&c, st);
	}
	st->next = next;
	st->off = c.pos - data;
	return next != CLASSIFY_NEXT_DONE;
}

/* Whether a UDP destination port is a tunnel's, which the walk goes into. */
INLINE int tunnel_port(__be16 port)
{
	return port == bpf_htons(VXLAN_PORT) || port == bpf_htons(GENEVE_PORT) || port == bpf_htons(GTPU_PORT);
}

/* The walk of the common G-PDU in one piece, without its steps' calls and
 * without clearing the whole walk first: untagged Ethernet, IPv4 without
 * options to the GTP-U port, a whole G-PDU, IPv4 in it, neither
 * fragmented, and no further tunnel. Writes st as the walk would, every
 * field of it the walk's users read (the fragment's id only when the
 * packet is one), and returns 1; 0, st untouched, for any other frame,
 * which the walk takes. */
INLINE int walk_gpdu4(struct xdp_md *ctx, struct classify_state *st)
{
	void *data = (void *)(long)ctx->data;
	struct cursor c = {data, (void *)(long)ctx->data_end};
	struct ethhdr *eth = cursor_take(&c, struct ethhdr);
	if (!eth || eth->h_proto != bpf_htons(ETH_P_IP))
		return 0;
	struct iphdr *ip = cursor_take(&c, struct iphdr);
	/* Version 4 and IHL 5 in one octet. */
	if (!ip || *(__u8 *)ip != 0x45 || ipv4_is_fragment(ip) || ip->protocol != IPPROTO_UDP ||
	    bpf_ntohs(ip->tot_len) < sizeof(*ip) || (void *)ip + bpf_ntohs(ip->tot_len) > c.end)
		return 0;
	struct udphdr *u = cursor_take(&c, struct udphdr);
	if (!u || u->dest != bpf_htons(GTPU_PORT))
		return 0;
	struct gtpu_info g;
	if (parse_gtpu(&c, &g) || g.hdr->type != GTPU_G_PDU || !g.payload_len)
		return 0;
	struct iphdr *in;
	if (parse_ipv4(&c, &in) || ipv4_is_fragment(in) || in->protocol == IPPROTO_GRE)
		return 0;
	struct udphdr *iu = NULL;
	if (in->protocol == IPPROTO_UDP) {
		iu = c.pos;
		if ((void *)(iu + 1) > c.end)
			iu = NULL; /* the walk ends there, without ports */
		else if (tunnel_port(iu->dest))
			return 0;
	}
	struct classify_key *k = &st->key;
	__builtin_memset(k, 0, __builtin_offsetof(struct classify_key, outer_src));
	k->tunnels = 1;
	k->tunnel_type[0] = TUNNEL_GTPU;
	k->tunnel_id[0] = g.hdr->teid;
	k->qfi = g.has_qfi ? g.qfi : 0;
	k->dscp = in->tos >> 2;
	k->proto = in->protocol;
	set_addr4(k->outer_src, ip->saddr);
	set_addr4(k->outer_dst, ip->daddr);
	set_addr4(k->inner_src, in->saddr);
	set_addr4(k->inner_dst, in->daddr);
	__builtin_memset(&k->src_port, 0, sizeof(*k) - __builtin_offsetof(struct classify_key, src_port));
	if (iu) {
		k->src_port = iu->source;
		k->dst_port = iu->dest;
		c.pos = iu + 1;
		walk_rtp(&c, k);
	} else {
		take_ports(&c, k, in->protocol);
	}
	st->off = c.pos - data;
	st->next = CLASSIFY_NEXT_DONE;
	st->ips = 2;
	st->frag = 0;
	st->first = 0;
	st->rule = 0;
	__builtin_memset(&st->outer, 0, sizeof(st->outer));
	st->outer.proto = eth->h_proto;
	st->outer.l3_off = ETH_HLEN;
	chain_keep_gtpu(&st->outer.gtpu, ETH_HLEN + sizeof(*ip) + sizeof(*u), &g);
	return 1;
}

/* Parses a frame into the per-CPU walk's key; NULL when the map fails. */
INLINE struct classify_state *classify_parse(struct xdp_md *ctx)
{
	__u32 zero = 0;
	struct classify_state *st = bpf_map_lookup_elem(&classify_walk, &zero);
	if (!st)
		return NULL;
	if (walk_gpdu4(ctx, st))
		return st;
	__builtin_memset(st, 0, sizeof(*st));
	for (int i = 0; i < CLASSIFY_MAX_STEPS; i++)
		if (!classify_step(ctx, st))
			break;
	return st;
}

INLINE int beats(const struct classify_verdict *a, const struct classify_verdict *b)
{
	return !b->rule || a->priority > b->priority || (a->priority == b->priority && a->order < b->order);
}

/* Whether a count or mirror rule hands a packet on to the best rule below. */
INLINE int hands_on(__u8 action)
{
	return action == CLASSIFY_COUNT || action == CLASSIFY_MIRROR;
}

/* Takes a rule that hands packets on into the best CLASSIFY_MAX_CHAIN of
 * them, best first (rule 0 for none), which it beats the last of. */
INLINE void keep(struct classify_verdict *kept, const struct classify_verdict *v)
{
	kept[CLASSIFY_MAX_CHAIN - 1] = *v;
#pragma unroll
	for (int i = CLASSIFY_MAX_CHAIN - 1; i > 0; i--) {
		if (beats(&kept[i], &kept[i - 1])) {
			struct classify_verdict t = kept[i - 1];
			kept[i - 1] = kept[i];
			kept[i] = t;
		}
	}
}

/* The rules a key meets in the half the epoch names, in one pass over the
 * masks: the best rule that decides (neither counts nor mirrors), and the
 * best rules that hand packets on, those of them above it first. One
 * probe per mask, in the order of their best priority, until no mask left
 * holds a rule above the decision found; in a mask whose rule for the key
 * hands packets on, the next levels of its entry too. A function of its
 * own so that the verifier checks it once. */
__noinline int classify_search(const struct classify_key *key, __u32 epoch, struct classify_outcome *out)
{
	if (!key || !out)
		return 0;
	__u32 h = epoch & 1;
	struct classify_half *half = bpf_map_lookup_elem(&classify_masks, &h);
	if (!half)
		return 0;
	struct classify_verdict best = {}, kept[CLASSIFY_MAX_CHAIN] = {};
	struct classify_entry_key ek = {.half = h};
	const __u64 *k = (const __u64 *)key;
	__u64 *v = (__u64 *)&ek.value;
	__u32 n = half->n;
	for (int i = 0; i < CLASSIFY_MAX_MASKS && i < n; i++) {
		__u32 slot = half->order[i] & (CLASSIFY_MAX_MASKS - 1);
		struct classify_mask *m = &half->masks[slot];
		if (best.rule && best.priority > m->max_priority)
			break;
		const __u64 *mk = (const __u64 *)&m->mask;
		for (int w = 0; w < sizeof(*key) / 8; w++)
			v[w] = k[w] & mk[w];
		ek.mask = slot;
		for (__u32 l = 0; l < CLASSIFY_MAX_CHAIN; l++) {
			ek.level = l;
			struct classify_verdict *found = bpf_map_lookup_elem(&classify_entries, &ek);
			/* The levels below rank lower still. */
			if (!found || !beats(found, &best))
				break;
			if (!hands_on(found->action)) {
				best = *found;
				break;
			}
			if (!beats(found, &kept[CLASSIFY_MAX_CHAIN - 1]))
				break;
			keep(kept, found);
		}
	}
	/* The rules that hand packets on above the decision, then it. */
	int done = 0;
#pragma unroll
	for (int i = 0; i < CLASSIFY_MAX_CHAIN; i++) {
		if (done)
			continue;
		struct classify_verdict *r = &kept[i];
		if (!r->rule || !beats(r, &best)) {
			r = &best;
			done = 1;
		}
		out->rule[i] = r->rule;
		out->action[i] = r->action;
	}
	return 0;
}

/* The outcome for a key from the flow cache (whose key ck is), while
 * the epoch holds; else searched, and kept there. */
INLINE void cached_outcome(void *cache, const void *ck, const struct classify_key *key, __u32 epoch,
			   struct classify_outcome *out)
{
	struct classify_cached *c = bpf_map_lookup_elem(cache, ck);
	if (c && c->epoch == epoch) {
		*out = c->outcome;
		return;
	}
	struct classify_cached fresh = {.epoch = epoch};
	classify_search(key, epoch, &fresh.outcome);
	*out = fresh.outcome;
	bpf_map_update_elem(cache, ck, &fresh, BPF_ANY);
}

/* Whether the key's four addresses are all IPv4 (::ffff:a.b.c.d): then
 * k4 is its shorter form. */
INLINE int compact_key(const struct classify_key *key, struct classify_key4 *k4)
{
	const __u8 *a = key->outer_src;
#pragma unroll
	for (int i = 0; i < 4; i++) {
		/* 8-aligned (the assertion beside struct classify_key4) */
		const __u8 *addr = a + 16 * i;
		if (*(const __u64 *)addr || *(const __u32 *)(addr + 8) != bpf_htonl(0xffff))
			return 0;
		k4->addr[i] = *(const __be32 *)(addr + 12);
	}
	__builtin_memcpy(k4->head, key, sizeof(k4->head));
	__builtin_memcpy(k4->tail, &key->src_port, sizeof(k4->tail));
	return 1;
}

/* The outcome for a key: from the flow cache while the epoch holds. */
INLINE int classify_outcome(const struct classify_key *key, struct classify_outcome *out)
{
	__u32 zero = 0;
	__u32 *ep = bpf_map_lookup_elem(&classify_epoch, &zero);
	if (!ep)
		return -1;
	__u32 epoch = *(volatile __u32 *)ep;
	struct classify_key4 k4;
	if (compact_key(key, &k4))
		cached_outcome(&classify_cache4, &k4, key, epoch, out);
	else
		cached_outcome(&classify_cache, key, key, epoch, out);
	return 0;
}

/* What the rules a packet meets make of it: every one counts it; the last
 * decides, unless it hands the packet on too (count, mirror): then it goes
 * on as if no rule matched. */
struct classify_decision {
	struct classify_outcome met; /* the rules met, best first */
	__u32 rule;                  /* the last, 0 for none */
	__u8 action;                 /* what it does */
	__u8 mirrored;               /* bit i: the i-th rule met mirrors */
};

/* Classifies a packet: 1 with the rules' decision in *d, its walk in *stp;
 * 0 for a packet that is not IP (rules are about IP traffic: ARP and the
 * like go on); -1 when a map fails. Counts the packet for every rule met. */
INLINE int classify_packet(struct xdp_md *ctx, struct classify_state **stp, struct classify_decision *d)
{
	struct classify_state *st = classify_parse(ctx);
	struct classify_outcome *o = &d->met;
	__builtin_memset(d, 0, sizeof(*d));
	*stp = st;
	if (!st)
		return -1;
	if (!st->ips)
		return 0;
	if (st->frag && !st->first) { /* what follows a first fragment */
		struct classify_outcome *first = bpf_map_lookup_elem(&classify_frags, &st->frag_id);
		if (first)
			*o = *first;
		else
			o->action[0] = orphan_fragment_action;
	} else {
		if (classify_outcome(&st->key, o))
			return -1;
		if (st->first)
			bpf_map_update_elem(&classify_frags, &st->frag_id, o, BPF_ANY);
	}
	__u64 len = ctx->data_end - ctx->data;
	d->action = o->action[0];
	for (int i = 0; i < CLASSIFY_MAX_CHAIN && o->rule[i]; i++) {
		d->rule = o->rule[i];
		d->action = o->action[i];
		count_packet(&classify_counters, &d->rule, len);
		if (d->action == CLASSIFY_MIRROR)
			d->mirrored |= 1 << i;
	}
	st->rule = d->rule;
	return 1;
}

_Static_assert(__builtin_offsetof(struct classify_egress, src) ==
		       __builtin_offsetof(struct classify_egress, dst) + ETH_ALEN,
	       "an egress's addresses lie as an Ethernet header's do");

/* Where a rule that redirects or mirrors sends packets; NULL when it names
 * no interface. */
INLINE struct classify_egress *egress_of(__u32 rule)
{
	struct classify_egress *out = bpf_map_lookup_elem(&classify_targets, &rule);
	return out && out->ifindex ? out : NULL;
}

/* Out of the interface of a redirecting rule, with its Ethernet addresses. */
INLINE int redirect_rule(struct xdp_md *ctx, __u32 rule)
{
	struct classify_egress *out = egress_of(rule);
	struct ethhdr *eth = (void *)(long)ctx->data;
	if (!out || (void *)(eth + 1) > (void *)(long)ctx->data_end)
		return XDP_ABORTED;
	__builtin_memcpy(eth->h_dest, out->dst, 2 * ETH_ALEN);
	return bpf_redirect(out->ifindex, 0);
}

/* XDP cannot copy a packet: the metadata asks the TC program of the same
 * interface to, and to drop or redirect the packet after the copies when
 * the rule below the mirroring ones says so. The action left to XDP. */
INLINE __u8 ask_for_copies(struct xdp_md *ctx, const struct classify_decision *d)
{
	__u8 action = d->action;
	struct classify_mirror_meta *m;
	if (push_meta(ctx, m)) {
		__builtin_memset(m, 0, sizeof(*m));
		m->magic = CLASSIFY_MIRROR_MAGIC;
		for (int i = 0; i < CLASSIFY_MAX_CHAIN; i++)
			if (d->mirrored & 1 << i)
				m->mirror[i] = d->met.rule[i];
		if (action == CLASSIFY_DROP || action == CLASSIFY_REDIRECT) {
			m->then = d->rule;
			m->then_action = action;
		}
	}
	return action == CLASSIFY_DROP || action == CLASSIFY_REDIRECT ? CLASSIFY_PASS : action;
}

/* Removes steering's metadata before a packet, if there, and keeps what
 * lies behind it: the chain_mirror_request of a packet to copy. */
INLINE void drop_slice_meta(struct xdp_md *ctx)
{
	struct slice_meta *m;
	if (read_meta(ctx, m) && m->magic == SLICE_META_MAGIC)
		bpf_xdp_adjust_meta(ctx, sizeof(*m));
}

/* Steers a packet of a chain, its key k, to a CPU of the slice, where
 * the stage after steering runs (xdp_slice_cpu); here, when that CPU has
 * no queue. */
INLINE int chain_steer(struct xdp_md *ctx, const struct classify_key *k, __u32 slot, __u32 slice)
{
	int act = steer(ctx, k, slice, slot + 1);
	if (act != XDP_PASS)
		return act;
	drop_slice_meta(ctx);
	chain_next(ctx, slot, STAGE_STEER);
	return XDP_PASS;
}

/* The XDP action of the packet of key k that a rule's action ends there:
 * drop, pass, redirect, or steer to a CPU of the rule's slice (the chain
 * ci's stages after steering running there, when ci is not NULL); -1 for
 * one that lets it go on (none, count, mirror). */
INLINE int end_action(struct xdp_md *ctx, __u8 action, __u32 rule, const struct classify_key *k,
		      const struct chain_iface *ci)
{
	switch (action) {
	case CLASSIFY_DROP:
		return XDP_DROP;
	case CLASSIFY_PASS:
		return XDP_PASS;
	case CLASSIFY_REDIRECT:
		return redirect_rule(ctx, rule);
	case CLASSIFY_STEER: {
		struct classify_egress *out = bpf_map_lookup_elem(&classify_targets, &rule);
		if (!out)
			return XDP_ABORTED;
		return ci ? chain_steer(ctx, k, ci->slot, out->slice) : steer(ctx, k, out->slice, 0);
	}
	}
	return -1;
}

SEC("xdp")
int xdp_classify(struct xdp_md *ctx)
{
	drop_meta(ctx);
	struct classify_state *st;
	struct classify_decision d;
	int found = classify_packet(ctx, &st, &d);
	if (found < 0 || !st)
		return XDP_ABORTED;
	if (!found)
		return XDP_PASS;
	int act = end_action(ctx, d.mirrored ? ask_for_copies(ctx, &d) : d.action, d.rule, &st->key, NULL);
	return act < 0 ? XDP_PASS : act;
}

_Static_assert(__builtin_offsetof(struct classify_egress, dst) == __builtin_offsetof(struct chain_mirror, dst) &&
		       __builtin_offsetof(struct classify_egress, src) == __builtin_offsetof(struct chain_mirror, src),
	       "a chain_mirror is the start of an egress");

/* In a chain the UPF sends packets on in XDP, where TC never sees them: a
 * mirrored packet carries the egress of the best mirroring rule it met in
 * its metadata to the UPF stage, which sends the copy beside the packet.
 * A packet the rule below drops leaves as its own copy. The packet's XDP
 * action when that ends it, else -1. */
INLINE int chain_mirror(struct xdp_md *ctx, const struct classify_decision *d)
{
	__u32 rule = 0;
	for (int i = CLASSIFY_MAX_CHAIN - 1; i >= 0; i--)
		if (d->mirrored & 1 << i)
			rule = d->met.rule[i];
	struct classify_egress *out = egress_of(rule);
	if (!out)
		return -1;
	if (d->action == CLASSIFY_DROP)
		return redirect_rule(ctx, rule);
	/* The UPF stage takes metadata of exactly this size for a copy's:
	 * the stage dropped what the frame came with. */
	struct chain_mirror_request *m;
	if (push_meta(ctx, m)) {
		m->magic = CHAIN_MIRROR_MAGIC;
		__builtin_memcpy(&m->mirror, out, sizeof(m->mirror));
	}
	return -1;
}

/* The classify stage of a chain: a rule's drop, redirect and pass end the
 * packet there; a steering rule sends it to its slice's CPUs, where the
 * later stages run; a counted or mirrored packet, and one no rule matched,
 * goes on to the next stage as if nothing had matched. A mirrored packet
 * that goes on asks the UPF stage for its copy (chain_mirror_request). */
SEC("xdp")
int xdp_classify_stage(struct xdp_md *ctx)
{
	struct chain_iface *ci = chain_of(ctx);
	if (!ci)
		return XDP_PASS;
	drop_meta(ctx);
	struct classify_state *st;
	struct classify_decision d;
	int found = classify_packet(ctx, &st, &d);
	if (found < 0 || !st)
		return XDP_ABORTED;
	if (d.mirrored) {
		int act = chain_mirror(ctx, &d);
		if (act >= 0)
			return act;
	}
	int act = end_action(ctx, found ? d.action : CLASSIFY_NONE, d.rule, &st->key, ci);
	if (act >= 0)
		return act;
	st->chain_slot = ci->slot;
	st->chain_slice = ci->slice;
	int handed = !chain_unhanded((void *)(long)ctx->data, (void *)(long)ctx->data_end);
	if (handed)
		chain_hand(ctx, &st->outer);
	chain_next(ctx, ci->slot, STAGE_CLASSIFY);
	if (handed)
		chain_drop_handoff(); /* no later stage took it */
	return XDP_PASS;
}

/* Whether the steer stage sends a packet of key k to another CPU: not
 * GTP-U signalling (an echo is answered where it arrives). */
INLINE int steerable(const struct classify_key *k)
{
	return !(!k->tunnels && k->proto == IPPROTO_UDP && k->dst_port == bpf_htons(GTPU_PORT));
}

/* The steer stage of the chain in slot, on the key k of the packet, NULL
 * for one that is not steered (not IP, a fragment after the first, which
 * lacks the ports of its flow): to a CPU of the slice by the hash of its
 * innermost flow. */
INLINE int steer_stage(struct xdp_md *ctx, __u32 slot, __u32 slice, const struct classify_key *k)
{
	if (k && steerable(k))
		return chain_steer(ctx, k, slot, slice);
	chain_next(ctx, slot, STAGE_STEER);
	return XDP_PASS;
}

/* The key of a walk for the steer stage: NULL when not steered. */
INLINE const struct classify_key *walked_key(const struct classify_state *st)
{
	return st && st->ips && !st->frag ? &st->key : NULL;
}

/* The steer stage after the classify stage, whose walk it takes, and the
 * chain the classify stage found. */
SEC("xdp")
int xdp_steer_stage(struct xdp_md *ctx)
{
	__u32 zero = 0;
	struct classify_state *st = bpf_map_lookup_elem(&classify_walk, &zero);
	if (!st)
		return XDP_PASS;
	int act = steer_stage(ctx, st->chain_slot, st->chain_slice, walked_key(st));
	chain_drop_handoff(); /* steered to another CPU, or no later stage */
	return act;
}

/* The steering parse of an IP header: its addresses into k as the walk
 * writes them, its upper-layer protocol into *proto; -1 for a fragment,
 * IPv6 extension headers or no IP, which the walk takes. */
INLINE int steer_ip(struct cursor *c, struct classify_key *k, __u8 *proto)
{
	__u8 *v = c->pos;
	if ((void *)(v + 1) > c->end)
		return -1;
	if (*v >> 4 == 4) {
		struct iphdr *ip;
		if (parse_ipv4(c, &ip) || ipv4_is_fragment(ip))
			return -1;
		set_addr4(k->inner_src, ip->saddr);
		set_addr4(k->inner_dst, ip->daddr);
		*proto = ip->protocol;
		return 0;
	}
	struct ipv6hdr *ip6;
	if (parse_ipv6(c, &ip6))
		return -1;
	*proto = ip6->nexthdr;
	if (ipv6_is_ext(*proto))
		return -1;
	__builtin_memcpy(k->inner_src, &ip6->saddr, 16);
	__builtin_memcpy(k->inner_dst, &ip6->daddr, 16);
	return 0;
}

/* The steering parse of the ports after an IP header, as the walk takes
 * them; -1 for a header the walk would go on from (a tunnel), 1 for a
 * G-PDU's UDP header (outer, when outer). */
INLINE int steer_ports(struct cursor *c, struct classify_key *k, __u8 proto, int outer)
{
	k->proto = proto;
	k->src_port = 0;
	k->dst_port = 0;
	switch (proto) {
	case IPPROTO_UDP: {
		struct udphdr *u = cursor_take(c, struct udphdr);
		if (!u)
			return 0;
		k->src_port = u->source;
		k->dst_port = u->dest;
		if (!tunnel_port(u->dest))
			return 0;
		return outer && u->dest == bpf_htons(GTPU_PORT) ? 1 : -1;
	}
	case IPPROTO_GRE:
		return -1;
	}
	take_ports(c, k, proto);
	return 0;
}

/* The fields of k that flow_hash reads, for the packets a UPF's interface
 * carries: IP, and IP in a G-PDU, neither fragmented nor in a further
 * tunnel; as the walk would have them, so that a flow keeps its CPU
 * whether the classify stage runs or not, at a fraction of the walk's
 * cost. -1 for any other packet, which the walk takes. */
INLINE int steer_parse(struct xdp_md *ctx, struct classify_key *k)
{
	struct cursor c = {(void *)(long)ctx->data, (void *)(long)ctx->data_end};
	struct ethhdr *eth;
	__be16 proto;
	__u8 l4;
	if (parse_eth_qinq(&c, &eth, &proto) || steer_ip(&c, k, &l4))
		return -1;
	int gtpu = steer_ports(&c, k, l4, 1);
	if (gtpu <= 0)
		return gtpu;
	struct gtpu_info g;
	if (parse_gtpu(&c, &g) || g.hdr->type != GTPU_G_PDU || !g.payload_len)
		return 0; /* GTP-U signalling, as the walk leaves it */
	k->tunnels = 1;
	k->tunnel_id[0] = g.hdr->teid;
	if (steer_ip(&c, k, &l4))
		return -1;
	return steer_ports(&c, k, l4, 0) < 0 ? -1 : 0;
}

/* The steer stage first in its chain: it parses the packet itself. */
SEC("xdp")
int xdp_steer_entry(struct xdp_md *ctx)
{
	drop_meta(ctx);
	struct classify_key k __attribute__((aligned(8))) = {}; /* for set_addr4 */
	const struct classify_key *key = steer_parse(ctx, &k) ? walked_key(classify_parse(ctx)) : &k;
	struct chain_iface *ci = chain_of(ctx);
	return ci ? steer_stage(ctx, ci->slot, ci->slice, key) : XDP_PASS;
}

/* On the CPU a packet was steered to, before the kernel takes it: takes it
 * off the CPU's queue count and counts it for its slice and its flow
 * there; a chain's packet goes on to the interface's stage after
 * steering. */
SEC("xdp/cpumap")
int xdp_slice_cpu(struct xdp_md *ctx)
{
	struct slice_meta *m;
	if (!read_meta(ctx, m) || m->magic != SLICE_META_MAGIC)
		return XDP_PASS;
	__u32 id = m->slice, hash = m->hash, next = m->next, cpu = bpf_get_smp_processor_id();
	__u64 len = ctx->data_end - ctx->data;
	struct cpu_load *load = bpf_map_lookup_elem(&cpu_loads, &cpu);
	if (load)
		load->dequeued++; /* only this CPU writes it */
	count_packet(&slice_cpu_counters, &id, len);
	struct counter *f = bpf_map_lookup_elem(&flow_cpu_counters, &hash);
	if (f) {
		f->packets++;
		f->bytes += len;
	} else {
		struct counter first = {1, len};
		bpf_map_update_elem(&flow_cpu_counters, &hash, &first, BPF_ANY);
	}
	if (next) { /* a chain's: its stage after steering runs here */
		bpf_xdp_adjust_meta(ctx, sizeof(*m)); /* a chain_mirror_request behind it stays */
#define CPU_STAGE(n)                                              \
	case n:                                                   \
		bpf_tail_call_static(ctx, &chain_cpu_stages, n); \
		break;
		switch (next - 1) {
			CHAIN_EACH_SLOT(CPU_STAGE)
		}
#undef CPU_STAGE
	}
	return XDP_PASS;
}

/* Sends the copy of a packet out of the interface of e, with its Ethernet
 * addresses, and gives the packet its own back (eth). */
INLINE void clone_to(struct __sk_buff *skb, const struct chain_mirror *e, const struct ethhdr *eth)
{
	bpf_skb_store_bytes(skb, 0, e->dst, 2 * ETH_ALEN, 0);
	bpf_clone_redirect(skb, e->ifindex, 0);
	bpf_skb_store_bytes(skb, 0, eth, 2 * ETH_ALEN, 0);
}

/* The copies of mirrored packets, at TC ingress behind xdp_classify (on the
 * CPU steering sent the packet to, if it did): one out of each mirroring
 * rule's interface with its Ethernet addresses; then the packet itself
 * on as usual, or dropped or redirected as the rule below the mirroring
 * ones says. In a chain, a packet the UPF stage or a rule below passes to
 * the kernel carries the classify stage's chain_mirror_request, all its
 * metadata or behind steering's: its copy is made here, as the UPF stage
 * would have. Metadata of any other shape asks for nothing. */
SEC("tc")
int tc_classify_mirror(struct __sk_buff *skb)
{
	void *meta = (void *)(long)skb->data_meta, *data = (void *)(long)skb->data;
	struct ethhdr eth;
	struct slice_meta *sm = meta;
	if ((void *)(sm + 1) <= data && sm->magic == SLICE_META_MAGIC)
		meta = sm + 1;
	struct chain_mirror_request *cm = meta;
	if ((void *)(cm + 1) <= data && cm->magic == CHAIN_MIRROR_MAGIC && (void *)(cm + 1) == data) {
		struct chain_mirror e = cm->mirror; /* the metadata goes with the first store */
		if (!bpf_skb_load_bytes(skb, 0, &eth, sizeof(eth)))
			clone_to(skb, &e, &eth);
		return TC_ACT_OK;
	}
	struct classify_mirror_meta *mp = meta;
	if ((void *)(mp + 1) > data || mp->magic != CLASSIFY_MIRROR_MAGIC)
		return TC_ACT_OK;
	struct classify_mirror_meta m = *mp; /* the metadata goes with the first store */
	if (bpf_skb_load_bytes(skb, 0, &eth, sizeof(eth)))
		return TC_ACT_OK;
	for (int i = 0; i < CLASSIFY_MAX_CHAIN; i++) {
		__u32 rule = m.mirror[i];
		struct classify_egress *out = rule ? egress_of(rule) : NULL;
		if (out)
			clone_to(skb, (struct chain_mirror *)out, &eth);
	}
	if (m.then_action == CLASSIFY_DROP)
		return TC_ACT_SHOT;
	if (m.then_action == CLASSIFY_REDIRECT) {
		struct classify_egress *out = egress_of(m.then);
		if (!out)
			return TC_ACT_SHOT;
		bpf_skb_store_bytes(skb, 0, out->dst, 2 * ETH_ALEN, 0);
		return bpf_redirect(out->ifindex, 0);
	}
	return TC_ACT_OK;
}

/* The CPU map's enqueue tracepoint: the packets that found a CPU's queue
 * full, which xdp_slice_cpu never sees. Raw, so that attaching it needs no
 * tracefs; its arguments are those of trace_xdp_cpumap_enqueue: map_id,
 * processed, drops, to_cpu. */
SEC("raw_tracepoint/xdp_cpumap_enqueue")
int slice_queue_drops(struct bpf_raw_tracepoint_args *a)
{
	__u32 zero = 0, cpu = a->args[3], drops = a->args[2];
	__u32 *ours = bpf_map_lookup_elem(&slice_cpus_id, &zero);
	if (!drops || !ours || (__u32)a->args[0] != *ours)
		return 0;
	struct cpu_load *load = bpf_map_lookup_elem(&cpu_loads, &cpu);
	if (load)
		__sync_fetch_and_add(&load->dropped, drops);
	return 0;
}

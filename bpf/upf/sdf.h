/* SDF filters (TS 29.244 8.2.5): the header fields they look at, parsed
 * from a packet only when a PDR has filters, and the match. */
#ifndef XDP5G_UPF_SDF_H
#define XDP5G_UPF_SDF_H

#include "../lib/parser.h"
#include "maps.h"

/* Bounds an IP header's offset for the verifier: no frame is as long. */
#define IP_OFF_MASK 0x3fff

/* What SDF filters match in a packet. */
struct flow {
	__be32 src[4]; /* IPv4 in word 0, the others zero */
	__be32 dst[4];
	__u16 sport, dport; /* host order */
	__u8 proto;         /* the upper layer, past IPv6 extension headers */
	__u8 other_family;  /* the enum sdf_flags bit of the family it is not */
	__u8 has_ports;     /* TCP, UDP or SCTP, and not a later fragment */
};

/* Fills fl from the IP packet at c; all zero if there is none, which the
 * callers have ruled out. */
INLINE void parse_flow(struct flow *fl, struct cursor *c)
{
	__u8 *ip_end;
	int later_fragment;
	__builtin_memset(fl, 0, sizeof(*fl));
	struct iphdr *ip4;
	struct ipv6hdr *ip6;
	if (!parse_ipv4(c, &ip4)) {
		fl->src[0] = ip4->saddr;
		fl->dst[0] = ip4->daddr;
		fl->proto = ip4->protocol;
		fl->other_family = SDF_IPV6;
		ip_end = (__u8 *)ip4 + bpf_ntohs(ip4->tot_len);
		later_fragment = ip4->frag_off & bpf_htons(IP_OFFSET);
	} else {
		if (parse_ipv6(c, &ip6))
			return;
		__builtin_memcpy(fl->src, &ip6->saddr, sizeof(fl->src));
		__builtin_memcpy(fl->dst, &ip6->daddr, sizeof(fl->dst));
		fl->proto = ip6->nexthdr;
		fl->other_family = SDF_IPV4;
		ip_end = (__u8 *)c->pos + bpf_ntohs(ip6->payload_len);
		later_fragment = parse_ipv6_ext(c, &fl->proto, NULL);
	}
	__u8 *l4 = c->pos;
	if (later_fragment ||
	    (fl->proto != IPPROTO_TCP && fl->proto != IPPROTO_UDP && fl->proto != IPPROTO_SCTP))
		return;
	/* The three carry the source and destination ports first. */
	__be16 *ports = (__be16 *)l4;
	if ((void *)(ports + 2) > c->end || (__u8 *)(ports + 2) > ip_end)
		return;
	fl->sport = bpf_ntohs(ports[0]);
	fl->dport = bpf_ntohs(ports[1]);
	fl->has_ports = 1;
}

INLINE int sdf_filter_matches(const struct sdf_filter *f, const struct flow *fl)
{
	if ((f->proto && f->proto != fl->proto) || (f->flags & fl->other_family))
		return 0;
	if ((f->flags & SDF_PORTS) &&
	    (!fl->has_ports || fl->sport < f->sport_lo || fl->sport > f->sport_hi ||
	     fl->dport < f->dport_lo || fl->dport > f->dport_hi))
		return 0;
	__be32 differ = 0;
#pragma unroll
	for (int i = 0; i < 4; i++)
		differ |= ((fl->src[i] & f->src_mask[i]) ^ f->src[i]) |
			  ((fl->dst[i] & f->dst_mask[i]) ^ f->dst[i]);
	return !differ;
}

/* Whether the IP packet at ip_off matches one of the SDF filters in slot.
 * A global function: the verifier checks it once, not on every path
 * through the PDR loops that call it. Each call parses the packet anew: a
 * flow kept for the next PDR would have to live off the caller's stack (a
 * buffer passed at every PDR multiplies the states the verifier tells
 * apart), and few packets try more than one PDR with filters. */
__attribute__((noinline)) int sdf_match(struct xdp_md *ctx, __u32 ip_off, __u32 slot)
{
	struct sdf_set *set = bpf_map_lookup_elem(&sdf_sets, &slot);
	if (!set)
		return 0;
	struct cursor c = { .pos = (void *)(long)ctx->data + (ip_off & IP_OFF_MASK),
			    .end = (void *)(long)ctx->data_end };
	struct flow fl;
	parse_flow(&fl, &c);
	for (int i = 0; i < SDF_PER_PDR; i++) {
		if (i >= set->count)
			break;
		if (sdf_filter_matches(&set->filter[i], &fl))
			return 1;
	}
	return 0;
}

#endif

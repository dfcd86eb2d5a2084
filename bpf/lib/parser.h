/* The packet parser every program shares.
 *
 * A parse step takes the cursor and checks the header at it, with what
 * belongs to it (VLAN tags, IPv4 options, the GTP-U extension chain),
 * against the end of the packet. It returns 0 when the header is there,
 * with the cursor right after it and a pointer to the header (and what else
 * it found) in its out parameters; or -1 when the packet holds no such
 * header there (too short, malformed, another version), its out parameters
 * and the cursor then anywhere: a caller that goes on after a -1 parses
 * from a copy of the cursor. Under it, cursor_take (common.h) takes a
 * header of fixed size: a pointer to it, NULL when the packet is short. */
#ifndef XDP5G_PARSER_H
#define XDP5G_PARSER_H

#include "common.h"
#include "eth.h"
#include "ipv4.h"
#include "ipv6.h"
#include "gtpu.h"
#include <linux/udp.h>

/* An Ethernet header with at most one VLAN tag; *proto is the EtherType of
 * the payload (network order). */
INLINE int parse_eth(struct cursor *c, struct ethhdr **eth, __be16 *proto)
{
	struct ethhdr *e = cursor_take(c, struct ethhdr);
	if (!e)
		return -1;
	*eth = e;
	*proto = e->h_proto;
	if (*proto == bpf_htons(ETH_P_8021Q) || *proto == bpf_htons(ETH_P_8021AD)) {
		struct vlan_hdr *v = cursor_take(c, struct vlan_hdr);
		if (!v)
			return -1;
		*proto = v->proto;
	}
	return 0;
}

/* parse_eth, and an inner 802.1Q tag after the outer one (QinQ). */
INLINE int parse_eth_qinq(struct cursor *c, struct ethhdr **eth, __be16 *proto)
{
	if (parse_eth(c, eth, proto))
		return -1;
	if (*proto == bpf_htons(ETH_P_8021Q)) {
		struct vlan_hdr *v = cursor_take(c, struct vlan_hdr);
		if (!v)
			return -1;
		*proto = v->proto;
	}
	return 0;
}

/* Whether a header's length field may claim more than the frame holds:
 * PARSE_WHOLE for a packet that must be whole, PARSE_CUT for one inside
 * the first fragment of a fragmented packet, which holds only its start.
 * Callers pass a constant, so the check is compiled in or out. */
enum parse_extent {
	PARSE_WHOLE,
	PARSE_CUT,
};

/* parse_ipv4, the total length checked as extent says. */
INLINE int parse_ipv4_in(struct cursor *c, struct iphdr **iph, enum parse_extent extent)
{
	struct iphdr *ip = c->pos;
	if ((void *)(ip + 1) > c->end || ip->version != 4 || ip->ihl < 5)
		return -1;
	__u32 hlen = ip->ihl * 4;
	__u32 tot = bpf_ntohs(ip->tot_len);
	if (tot < hlen || (extent == PARSE_WHOLE && (void *)ip + tot > c->end))
		return -1;
	c->pos = (void *)ip + hlen;
	*iph = ip;
	return 0;
}

/* An IPv4 header with its options. The total length must fit inside the
 * frame (the frame may carry padding). */
INLINE int parse_ipv4(struct cursor *c, struct iphdr **iph)
{
	return parse_ipv4_in(c, iph, PARSE_WHOLE);
}

/* parse_ipv6, the payload length checked as extent says. */
INLINE int parse_ipv6_in(struct cursor *c, struct ipv6hdr **iph, enum parse_extent extent)
{
	struct ipv6hdr *ip6 = c->pos;
	if ((void *)(ip6 + 1) > c->end || ip6->version != 6)
		return -1;
	if (extent == PARSE_WHOLE && (void *)(ip6 + 1) + bpf_ntohs(ip6->payload_len) > c->end)
		return -1;
	c->pos = ip6 + 1;
	*iph = ip6;
	return 0;
}

/* An IPv6 fixed header, whose payload must fit inside the frame. */
INLINE int parse_ipv6(struct cursor *c, struct ipv6hdr **iph)
{
	return parse_ipv6_in(c, iph, PARSE_WHOLE);
}

/* Whether an IPv6 Next Header is an extension header that precedes the
 * upper-layer header (RFC 8200 4.1; AH and ESP count as upper layers). A
 * switch: clang tests the four with one bit mask. */
INLINE int ipv6_is_ext(__u8 type)
{
	switch (type) {
	case IPPROTO_HOPOPTS:
	case IPPROTO_ROUTING:
	case IPPROTO_FRAGMENT:
	case IPPROTO_DSTOPTS:
		return 1;
	}
	return 0;
}

/* The extension headers that precede the upper-layer header (RFC 8200
 * 4.1; AH and ESP are upper layers to an SDF filter), *proto being the
 * fixed header's Next Header: leaves the cursor at the upper-layer header
 * and *proto its number. -1 for a fragment other than the first, whose
 * upper-layer header is in another packet. *frag, when frag is not NULL,
 * is the Fragment header met, else NULL. A chain cut short or too long
 * leaves *proto at an extension header. */
INLINE int parse_ipv6_ext(struct cursor *c, __u8 *proto, __u8 **frag)
{
	if (frag)
		*frag = NULL;
	for (int i = 0; i < IPV6_MAX_EXT; i++) {
		__u8 *h = c->pos;
		__u8 type = *proto;
		if (!ipv6_is_ext(type))
			return 0;
		if ((void *)(h + 8) > c->end) /* every extension header has 8 bytes or more */
			return 0;
		*proto = h[0];
		if (type == IPPROTO_FRAGMENT) {
			if (frag)
				*frag = h;
			if ((h[2] << 8 | h[3]) & IPV6_FRAG_OFFSET)
				return -1;
			c->pos = h + 8;
		} else {
			c->pos = h + ((__u32)h[1] + 1) * 8;
		}
	}
	return 0;
}

/* What the GTP-U parser found. */
struct gtpu_info {
	struct gtpu_hdr *hdr;
	__be16 seq;     /* 0 when the S flag is clear */
	__u8 qfi;       /* from the PDU Session Container */
	__u8 has_qfi;   /* 1: the chain holds a PDU Session Container */
	__u8 psc_type;  /* its PDU type (GTPU_PSC_DL, GTPU_PSC_UL) */
	__u8 psc_flags; /* its PPP and RQI bits */
	__u16 ran_off;  /* NR RAN Container content, from the GTP-U header; 0: none */
	__u16 ran_len;
	__u32 hdr_len;     /* header, optional fields and extension chain */
	__u32 payload_len; /* bytes after hdr_len */
};

/* parse_gtpu, the length checked as extent says: a cut G-PDU need hold
 * only its header and extension chain. */
INLINE int parse_gtpu_in(struct cursor *c, struct gtpu_info *g, enum parse_extent extent)
{
	struct gtpu_hdr *h = cursor_take(c, struct gtpu_hdr);
	if (!h || (h->flags & (GTPU_VERSION_MASK | GTPU_PT)) != (GTPU_V1 | GTPU_PT))
		return -1;
	g->hdr = h;
	g->seq = 0;
	g->has_qfi = 0;
	g->ran_off = 0;
	g->ran_len = 0;
	__u32 len = bpf_ntohs(h->length);
	if (extent == PARSE_WHOLE && (void *)(h + 1) + len > c->end)
		return -1;
	if (!(h->flags & (GTPU_E | GTPU_S | GTPU_PN))) {
		g->hdr_len = sizeof(*h);
		g->payload_len = len;
		return 0;
	}
	struct gtpu_opt *o = cursor_take(c, struct gtpu_opt);
	if (!o || len < sizeof(*o))
		return -1;
	if (h->flags & GTPU_S)
		g->seq = o->seq;
	__u32 used = sizeof(*o);
	__u8 next = (h->flags & GTPU_E) ? o->next_ext : 0;
	for (int i = 0; i < GTPU_MAX_EXT && next; i++) {
		__u8 *ext = c->pos;
		if ((void *)(ext + 1) > c->end)
			return -1;
		__u32 ext_len = (__u32)ext[0] * 4;
		if (!ext_len)
			return -1;
		__u8 *last = ext + (ext_len - 1);
		if ((void *)(last + 1) > c->end)
			return -1;
		if (next == GTPU_EXT_PDU_SESSION_CONTAINER && (void *)(ext + 3) <= c->end) {
			g->qfi = ext[2] & GTPU_PSC_QFI;
			g->psc_type = ext[1] >> 4;
			g->psc_flags = ext[2] & (GTPU_PSC_PPP | GTPU_PSC_RQI);
			g->has_qfi = 1;
		} else if (next == GTPU_EXT_NR_RAN_CONTAINER) {
			/* The content lies between the length and next-type octets. */
			g->ran_off = sizeof(*h) + used + 1;
			g->ran_len = ext_len - 2;
		}
		next = *last;
		c->pos = last + 1;
		used += ext_len;
	}
	if (next || used > len)
		return -1;
	g->hdr_len = sizeof(*h) + used;
	g->payload_len = len - used;
	return 0;
}

/* A GTPv1-U header, its optional fields and the whole extension-header
 * chain, each extension skipped by its length field (units of four
 * octets); the cursor is left at the payload, g->hdr at the header. */
INLINE int parse_gtpu(struct cursor *c, struct gtpu_info *g)
{
	return parse_gtpu_in(c, g, PARSE_WHOLE);
}

#endif

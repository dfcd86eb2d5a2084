/* The shared packet parser: each step validates one header against the end
 * of the packet and advances the cursor past it. */
#ifndef XDP5G_PARSER_H
#define XDP5G_PARSER_H

#include "common.h"
#include "eth.h"
#include "ipv4.h"
#include "ipv6.h"
#include "udp.h"
#include "gtpu.h"

/* An IPv4 header with its options; NULL when truncated or not IPv4. The
 * total length must fit inside the frame (the frame may carry padding). */
INLINE struct iphdr *parse_ipv4(struct cursor *c)
{
	struct iphdr *ip = c->pos;
	if ((void *)(ip + 1) > c->end || ip->version != 4 || ip->ihl < 5)
		return NULL;
	__u32 hlen = ip->ihl * 4;
	__u32 tot = bpf_ntohs(ip->tot_len);
	if (tot < hlen || (void *)ip + tot > c->end)
		return NULL;
	c->pos = (void *)ip + hlen;
	return ip;
}

INLINE struct ipv6hdr *parse_ipv6(struct cursor *c)
{
	struct ipv6hdr *ip6 = c->pos;
	if ((void *)(ip6 + 1) > c->end || ip6->version != 6)
		return NULL;
	if ((void *)(ip6 + 1) + bpf_ntohs(ip6->payload_len) > c->end)
		return NULL;
	c->pos = ip6 + 1;
	return ip6;
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

/* GTPv1-U header, optional fields and the whole extension-header chain,
 * each extension skipped by its length field (units of four octets). Returns
 * 0 and leaves the cursor at the payload, or -1 when malformed. */
INLINE int parse_gtpu(struct cursor *c, struct gtpu_info *g)
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
	if ((void *)(h + 1) + len > c->end)
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

#endif

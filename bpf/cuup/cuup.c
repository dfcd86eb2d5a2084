// SPDX-License-Identifier: GPL-2.0
/* The CU-UP's classifier, on its N3 and F1-U interfaces: the G-PDUs of the
 * CU-UP's own tunnels go to the AF_XDP socket of the queue they came in on,
 * with what the parse found in the XDP metadata (struct cuup_meta), so that
 * user space never parses them again; other traffic goes to the kernel, and
 * frames without a valid Ethernet header are dropped. One instance is
 * loaded per role, a constant; the instances share the tunnels and
 * counters. */
#include "../lib/parser.h"
#include "config.h"
#include "maps.h"

char LICENSE[] SEC("license") = "GPL";

/* What only the Go side reads, put into BTF for bpf2go (-type in
 * internal/ran/cuupxdp/gen.go): the constants and the metadata, which no
 * map or variable carries. */
const struct cuup_exports {
	enum cuup_role role;
	enum cuup_reason reason;
	enum cuup_meta_flags meta_flags;
	enum cuup_meta_magic meta_magic;
	struct cuup_meta meta;
} cuup_exports __attribute__((unused)) = {};

INLINE int finish(__u32 len, enum cuup_reason r, int action)
{
	__u32 key = (role - 1) * CUUP_REASON_COUNT + r;
	count_packet(&cuup_counters, &key, len);
	return action;
}

/* A multicast or all-zero source address: no station sends from it. */
INLINE int bad_source(const struct ethhdr *eth)
{
	const __u8 *s = eth->h_source;
	return (s[0] & 1) || !(s[0] | s[1] | s[2] | s[3] | s[4] | s[5]);
}

/* Where the outer headers lie, from the frame's start. */
struct outer {
	__u16 ip_off;
	__u16 gtpu_off;
	__u8 ip_version;
};

/* A G-PDU of one of our tunnels, its GTP-U header parsed: the checks of
 * the role, then the metadata and the socket of the queue. */
INLINE int deliver(struct xdp_md *ctx, __u32 bearer, __be32 teid, const struct gtpu_info *g,
		   const struct outer *o, __u32 pkt_len)
{
	__u8 flags = 0;
	if (g->has_qfi) {
		flags |= CUUP_META_PSC;
		if (g->psc_flags & GTPU_PSC_RQI)
			flags |= CUUP_META_RQI;
		if (g->psc_flags & GTPU_PSC_PPP)
			flags |= CUUP_META_PPP;
	}
	if (g->ran_len)
		flags |= CUUP_META_NR_RAN;
	if (role == CUUP_ROLE_N3) {
		if (!g->has_qfi)
			return finish(pkt_len, CUUP_DROP_NO_PSC, XDP_DROP);
		if (g->psc_type != GTPU_PSC_DL)
			return finish(pkt_len, CUUP_DROP_PDU_TYPE, XDP_DROP);
		if (!g->payload_len)
			return finish(pkt_len, CUUP_DROP_EMPTY, XDP_DROP);
	} else {
		if (g->has_qfi)
			return finish(pkt_len, CUUP_DROP_UNEXPECTED_PSC, XDP_DROP);
		/* A DL DATA DELIVERY STATUS may come alone. */
		if (!g->payload_len && !g->ran_len)
			return finish(pkt_len, CUUP_DROP_EMPTY, XDP_DROP);
	}

	struct cuup_meta *m;
	if (!push_meta(ctx, m))
		return finish(pkt_len, CUUP_DROP_NO_META, XDP_DROP);
	m->magic = CUUP_META_MAGIC;
	m->bearer = bearer;
	m->teid = bpf_ntohl(teid);
	m->tpdu_off = o->gtpu_off + g->hdr_len;
	m->tpdu_len = g->payload_len;
	m->ran_off = g->ran_len ? o->gtpu_off + g->ran_off : 0;
	m->ran_len = g->ran_len;
	m->ip_off = o->ip_off;
	m->gtpu_off = o->gtpu_off;
	m->ip_version = o->ip_version;
	m->role = role;
	m->qfi = g->has_qfi ? g->qfi : 0;
	m->flags = flags;
	int action = bpf_redirect_map(&cuup_xsks, ctx->rx_queue_index, XDP_PASS);
	return finish(pkt_len, action == XDP_REDIRECT ? CUUP_REDIRECT : CUUP_PASS_NO_SOCKET, action);
}

SEC("xdp")
int xdp_cuup(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u32 pkt_len = end - data;
	struct cursor c = { .pos = data, .end = end };
	struct ethhdr *eth;
	__be16 proto;
	if (parse_eth_qinq(&c, &eth, &proto) || bad_source(eth))
		return finish(pkt_len, CUUP_DROP_BAD_ETHERNET, XDP_DROP);

	struct outer o = { .ip_off = c.pos - data };
	__u32 ip_end; /* offset of the IP packet's end: Ethernet padding may follow */
	__u8 l4;
	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip;
		if (parse_ipv4(&c, &ip))
			return finish(pkt_len, CUUP_PASS_NOT_IP, XDP_PASS);
		if (ipv4_is_fragment(ip))
			return finish(pkt_len, CUUP_PASS_FRAGMENT, XDP_PASS);
		o.ip_version = 4;
		ip_end = o.ip_off + bpf_ntohs(ip->tot_len);
		l4 = ip->protocol;
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6;
		if (parse_ipv6(&c, &ip6))
			return finish(pkt_len, CUUP_PASS_NOT_IP, XDP_PASS);
		o.ip_version = 6;
		ip_end = o.ip_off + sizeof(*ip6) + bpf_ntohs(ip6->payload_len);
		l4 = ip6->nexthdr;
		__u8 *frag;
		if (parse_ipv6_ext(&c, &l4, &frag) || frag)
			return finish(pkt_len, CUUP_PASS_FRAGMENT, XDP_PASS);
	} else {
		return finish(pkt_len, CUUP_PASS_NOT_IP, XDP_PASS);
	}

	/* The datagram must fill the IP payload and hold a GTP-U header. */
	struct udphdr *udp = cursor_take(&c, struct udphdr);
	if (l4 != IPPROTO_UDP || !udp || udp->dest != bpf_htons(GTPU_PORT))
		return finish(pkt_len, CUUP_PASS_NOT_GTPU, XDP_PASS);
	__u32 udp_len = bpf_ntohs(udp->len);
	if ((__u32)((void *)udp - data) + udp_len != ip_end ||
	    udp_len < sizeof(*udp) + sizeof(struct gtpu_hdr))
		return finish(pkt_len, CUUP_PASS_NOT_GTPU, XDP_PASS);
	struct gtpu_hdr *h = c.pos;
	if ((void *)(h + 1) > end || (h->flags & (GTPU_VERSION_MASK | GTPU_PT)) != (GTPU_V1 | GTPU_PT))
		return finish(pkt_len, CUUP_PASS_NOT_GTPU, XDP_PASS);
	if (h->type != GTPU_G_PDU)
		return finish(pkt_len, CUUP_PASS_SIGNALLING, XDP_PASS);
	o.gtpu_off = (void *)h - data;

	struct cuup_tunnel_key key = { .teid = h->teid, .role = role };
	struct cuup_tunnel *t = bpf_map_lookup_elem(&cuup_tunnels, &key);
	if (!t)
		return finish(pkt_len, CUUP_PASS_UNKNOWN_TEID, XDP_PASS);
	/* From here on the tunnel is ours: what is wrong with it is dropped. */
	struct gtpu_info g;
	if (parse_gtpu(&c, &g) || sizeof(*udp) + sizeof(*h) + bpf_ntohs(h->length) != udp_len)
		return finish(pkt_len, CUUP_DROP_MALFORMED, XDP_DROP);
	return deliver(ctx, t->bearer, key.teid, &g, &o, pkt_len);
}

/* Steering to the CPUs of slices: a hash of the innermost flow picks a
 * CPU of the packet's slice, or of its prioritised flow, and the packet
 * goes there through a CPU map. When that CPU's queue fills, the flows that
 * may leave (non-prioritised first, prioritised only when even they cannot
 * be served) go to an alternative node instead: their outer destination
 * rewritten (a packet in no tunnel keeps its addresses), out of the port
 * they came in on (XDP_TX) or another. A flow's choice holds until the
 * queue has drained and a hold time has passed, so flows do not flap
 * between nodes. */
#ifndef XDP5G_CLASSIFY_STEER_H
#define XDP5G_CLASSIFY_STEER_H

#include "../lib/bucket.h"
#include "../lib/csum.h"
#include "../lib/parser.h"
#include "config.h"
#include "maps.h"

INLINE __u32 rotl32(__u32 x, int r) { return (x << r) | (x >> (32 - r)); }

/* One word into a MurmurHash3 state. */
INLINE __u32 hash_word(__u32 h, __u32 w)
{
	w *= 0xcc9e2d51;
	w = rotl32(w, 15);
	w *= 0x1b873593;
	h ^= w;
	return rotl32(h, 13) * 5 + 0xe6546b64;
}

/* The flow of a packet for steering: the innermost addresses, protocol
 * and ports, and the tunnel ids, so that flows inside one tunnel spread
 * and one flow never does. */
INLINE __u32 flow_hash(const struct classify_key *k)
{
	const __u32 *src = (const __u32 *)k->inner_src, *dst = (const __u32 *)k->inner_dst;
	__u32 h = 0;
	for (int i = 0; i < 4; i++) {
		h = hash_word(h, src[i]);
		h = hash_word(h, dst[i]);
		h = hash_word(h, k->tunnel_id[i]);
	}
	h = hash_word(h, ((__u32)k->src_port << 16) | k->dst_port);
	h = hash_word(h, k->proto);
	h ^= h >> 16; /* the finaliser: every input bit reaches every bucket bit */
	h *= 0x85ebca6b;
	h ^= h >> 13;
	h *= 0xc2b2ae35;
	return h ^ (h >> 16);
}

/* The packets in a CPU's queue. */
INLINE __u64 backlog(const struct cpu_load *l)
{
	__u64 out = l->dequeued + l->dropped;
	return l->enqueued > out ? l->enqueued - out : 0;
}

/* Whether a flow goes to an alternative node: its choice, kept until the
 * queue it left has drained and the hold time has passed. */
INLINE int offloads(__u32 hash, __u64 queued, int prioritised)
{
	__u64 now = bpf_ktime_get_coarse_ns();
	struct flow_route *r = bpf_map_lookup_elem(&flow_routes, &hash);
	if (r && r->offloaded) {
		if (queued > backlog_low || now - r->since < offload_hold_ns)
			return 1;
		r->offloaded = 0;
		r->since = now;
		return 0;
	}
	if (queued < (prioritised ? backlog_full : backlog_high))
		return 0;
	struct flow_route away = {.since = now, .offloaded = 1};
	bpf_map_update_elem(&flow_routes, &hash, &away, BPF_ANY);
	return 1;
}

/* Sends a packet to one of the alternative nodes alts, which are some:
 * outer destination MAC rewritten, the source MAC the port's own (the
 * packet's destination MAC), and for a tunnelled packet, whose outer
 * destination is this node, the outer destination address too, the IPv4
 * and (when there is one) UDP checksums fixed. A packet in no tunnel is
 * addressed to its end (the UPF's downlink to a UE): the node routes it on
 * with its addresses. Returns -1 when it cannot: an outer header of
 * another family than the alternative's (or neither IPv4 nor IPv6). */
INLINE int offload(struct xdp_md *ctx, const struct alt_nodes *alts, __u32 hash, int tunnelled)
{
	const struct alt_node *alt = &alts->node[(hash % alts->n) & (ALT_MAX - 1)];
	struct cursor c = {(void *)(long)ctx->data, (void *)(long)ctx->data_end};
	struct ethhdr *eth;
	__be16 proto;
	if (parse_eth(&c, &eth, &proto))
		return -1;
	if (proto == bpf_htons(ETH_P_IP) && !alt->ipv6) {
		struct iphdr *ip;
		if (parse_ipv4(&c, &ip))
			return -1;
		if (tunnelled) {
			__be32 old = ip->daddr, to;
			__builtin_memcpy(&to, alt->addr, sizeof(to));
			ip->daddr = to;
			ip->check = csum_replace4(ip->check, old, to);
			struct udphdr *udp = ip->protocol == IPPROTO_UDP && !ipv4_is_fragment(ip) ? cursor_take(&c, struct udphdr) : NULL;
			if (udp)
				udp_readdress(udp, &old, &to, sizeof(to));
		}
	} else if (proto == bpf_htons(ETH_P_IPV6) && alt->ipv6) {
		struct ipv6hdr *ip6;
		if (parse_ipv6(&c, &ip6))
			return -1;
		if (tunnelled) {
			/* Behind extension headers and AH a UDP checksum is out of reach. */
			if (ipv6_is_ext(ip6->nexthdr) || ip6->nexthdr == IPPROTO_AH)
				return -1;
			struct udphdr *udp = ip6->nexthdr == IPPROTO_UDP ? cursor_take(&c, struct udphdr) : NULL;
			if (udp)
				udp_readdress(udp, &ip6->daddr, alt->addr, sizeof(ip6->daddr));
			__builtin_memcpy(&ip6->daddr, alt->addr, sizeof(ip6->daddr));
		}
	} else {
		return -1;
	}
	__builtin_memcpy(eth->h_source, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, alt->mac, ETH_ALEN);
	return alt->ifindex ? bpf_redirect(alt->ifindex, 0) : XDP_TX;
}

/* Whether a packet of len bytes is within its slice's rate on this CPU;
 * one that is not is counted. */
INLINE int within_rate(const struct slice *sl, __u32 id, __u64 len)
{
	struct token_bucket *b = bpf_map_lookup_elem(&slice_buckets, &id);
	if (!b)
		return 1;
	b->rate = sl->rate;
	b->burst = sl->burst;
	if (bucket_take(b, bpf_ktime_get_coarse_ns(), len))
		return 1;
	count_packet(&slice_policed, &id, len);
	return 0;
}

/* Sends a packet of a slice to the CPU of its flow (a prioritised flow's
 * own, else its bucket's), with the slice, the hash and next (a chain's
 * slot + 1, 0 for none) in its metadata for xdp_slice_cpu there; or to an
 * alternative node when that CPU's queue is too full for it. XDP_PASS when
 * that CPU has no queue. */
INLINE int steer(struct xdp_md *ctx, const struct classify_key *k, __u32 id, __u32 next)
{
	struct slice *sl = bpf_map_lookup_elem(&slices, &id);
	if (!sl)
		return XDP_ABORTED;
	__u64 len = ctx->data_end - ctx->data;
	if (sl->rate && !within_rate(sl, id, len))
		return XDP_DROP;
	__u32 hash = flow_hash(k);
	struct prio_flow *prio = bpf_map_lookup_elem(&prio_flows, &hash);
	int prioritised = sl->prioritised;
	__u32 cpu = sl->cpus[hash % SLICE_BUCKETS];
	if (prio && prio->active) {
		prioritised = 1;
		cpu = prio->cpu;
		__sync_fetch_and_add(&prio->stats.packets, 1);
		__sync_fetch_and_add(&prio->stats.bytes, len);
	}
	struct cpu_load *load = bpf_map_lookup_elem(&cpu_loads, &cpu);
	if (!load)
		return XDP_ABORTED;
	/* Without an alternative node no flow leaves: no flow's route to
	 * look up. */
	__u32 zero = 0;
	struct alt_nodes *alts = bpf_map_lookup_elem(&alternatives, &zero);
	if (alts && alts->n && offloads(hash, backlog(load), prioritised)) {
		int act = offload(ctx, alts, hash, k->tunnels);
		if (act >= 0) {
			count_packet(&slice_offloaded, &id, len);
			return act;
		}
	}
	struct slice_meta *m;
	if (push_meta(ctx, m)) {
		m->magic = SLICE_META_MAGIC;
		m->slice = id;
		m->hash = hash;
		m->next = next;
	}
	/* On to the kernel on that CPU; here if it has no queue. */
	int act = bpf_redirect_map(&slice_cpus, cpu, XDP_PASS);
	if (act == XDP_REDIRECT)
		__sync_fetch_and_add(&load->enqueued, 1);
	return act;
}

#endif

/* IPv4 headers: fragments, the header the encapsulation writes, TTL; an
 * IP packet's sum from its own checksums. */
#ifndef XDP5G_IPV4_H
#define XDP5G_IPV4_H

#include "common.h"
#include "csum.h"
#include "ipv6.h"
#include <linux/ip.h>

#define IP_MF 0x2000
#define IP_OFFSET 0x1fff

/* Writes an option-less IPv4 header of a UDP datagram (TTL 64, ID 0, no
 * flags) in five whole words, with the checksum summed from registers
 * rather than read back from the packet: the encapsulation fast path. */
INLINE void ipv4_write_udp(struct iphdr *ip, __u16 tot_len, __u8 tos, __be32 saddr, __be32 daddr)
{
	__u32 *w = (__u32 *)ip;
	__u32 version_len = bpf_htons(0x4500 | tos) | (__u32)bpf_htons(tot_len) << 16;
	__u32 ttl_proto = bpf_htons(64 << 8 | IPPROTO_UDP);
	__u32 sum = (version_len & 0xffff) + (version_len >> 16) + ttl_proto + (saddr & 0xffff) + (saddr >> 16) +
		    (daddr & 0xffff) + (daddr >> 16);
	w[0] = version_len;
	w[1] = 0; /* ID, flags and fragment offset */
	w[2] = ttl_proto | (__u32)csum_fold(sum) << 16;
	w[3] = saddr;
	w[4] = daddr;
}

INLINE int ipv4_is_fragment(const struct iphdr *ip)
{
	return ip->frag_off & bpf_htons(IP_MF | IP_OFFSET);
}

/* The one's complement sum of the bytes of the IP packet at ip, as
 * csum_to_end sums them (unfolded, give or take a multiple of 0xffff),
 * derived from the packet's own checksums instead of read, as Linux's
 * local checksum offload does: a valid IPv4
 * header sums to zero, an ICMP message too, a TCP or UDP segment or an
 * ICMPv6 message to the negation of its pseudo-header. -1 where the packet
 * does not say: a fragment, a UDP datagram without a checksum or shorter
 * than its packet's payload, another protocol, an IPv6 extension header.
 * A packet whose own checksum is wrong gets a wrong sum: a tunnel checksum
 * made of it fails at the tunnel's other end, which drops the packet as
 * its destination would have. */
INLINE __s64 ip_packet_sum(void *ip, void *end)
{
	if (ip + 1 > end)
		return -1;
	int v6 = (*(__u8 *)ip >> 4) == 6;
	__u64 header = 0, pseudo; /* an IPv4 header sums to zero */
	__u8 proto;
	__u32 l4_len;
	void *l4;
	if (v6) {
		struct ipv6hdr *h = ip;
		if ((void *)(h + 1) > end)
			return -1;
		proto = h->nexthdr;
		l4_len = bpf_ntohs(h->payload_len);
		/* The addresses, in the header and in the pseudo-header
		 * (RFC 8200 8.1), cancel: its first two words and the
		 * pseudo-header's length and next header are left. */
		__u32 *w = ip;
		header = (__u64)w[0] + w[1];
		pseudo = (__u64)bpf_htonl(l4_len) + bpf_htonl(proto);
		l4 = h + 1;
	} else {
		struct iphdr *h = ip;
		if ((void *)(h + 1) > end || ipv4_is_fragment(h))
			return -1;
		proto = h->protocol;
		if (proto == IPPROTO_ICMP)
			return 0;
		__u32 hlen = h->ihl * 4;
		l4_len = bpf_ntohs(h->tot_len) - hlen;
		if (hlen < sizeof(*h) || l4_len > 0xffff)
			return -1;
		pseudo = (__u64)h->saddr + h->daddr + bpf_htonl(proto) + bpf_htonl(l4_len);
		l4 = ip + (hlen & 0x3c);
	}
	if (proto == IPPROTO_UDP) {
		struct udphdr *udp = l4;
		/* Its checksum covers its own length, which may be shorter. */
		if ((void *)(udp + 1) > end || !udp->check || bpf_ntohs(udp->len) != l4_len)
			return -1;
	} else if (proto != IPPROTO_TCP && !(v6 && proto == IPPROTO_ICMPV6)) {
		return -1;
	}
	/* The header's sum less the pseudo-header's. */
	return header + csum_neg(pseudo);
}

/* TTL decrement with the checksum adjusted as the kernel's ip_decrease_ttl
 * does (RFC 1624): the TTL is the high byte of its 16-bit word, so the
 * checksum rises by 0x0100 in network order. Computed from the checksum
 * alone: reading back the word the TTL store just changed waits for that
 * store. */
INLINE void ipv4_decrement_ttl(struct iphdr *ip)
{
	__u32 check = ip->check + (__u32)bpf_htons(0x0100);
	ip->check = check + (check >= 0xffff);
	ip->ttl--;
}

#endif

/* IPv6 addresses and extension headers. */
#ifndef XDP5G_IPV6_H
#define XDP5G_IPV6_H

#include "common.h"
#include <linux/ipv6.h>

/* The /64 prefix of an address: what a UE owns (TS 23.501 5.8.2.2.2). */
INLINE __u64 ipv6_prefix64(const struct in6_addr *a)
{
	__u64 p;
	__builtin_memcpy(&p, a, sizeof(p));
	return p;
}

/* Writes the IPv6 header of a UDP datagram of payload_len bytes, hop
 * limit 64, flow label 0 (RFC 6437: a tunnel endpoint may leave it so), in
 * whole words, and returns the sum of its pseudo-header (RFC 8200 8.1) as
 * csum_to_end sums it: each word of the addresses read once, written
 * and summed (never read back from the frame). */
INLINE __u64 ipv6_write_udp(struct ipv6hdr *ip6, __u16 payload_len, __u8 tclass, const void *saddr,
			    const void *daddr)
{
	__u32 *w = (void *)ip6;
	const __u32 *s = saddr, *d = daddr;
	w[0] = bpf_htonl(0x60000000 | (__u32)tclass << 20);
	/* Payload length, next header, hop limit. */
	w[1] = bpf_htons(payload_len) | (__u32)IPPROTO_UDP << 16 | (__u32)64 << 24;
	__u64 sum = (__u64)bpf_htonl(payload_len) + bpf_htonl(IPPROTO_UDP);
#pragma unroll
	for (int i = 0; i < 4; i++) {
		__u32 a = s[i], b = d[i];
		w[2 + i] = a;
		w[6 + i] = b;
		sum += (__u64)a + b;
	}
	return sum;
}

/* Extension headers skipped to find the upper-layer header; a longer chain
 * is left unparsed. */
#define IPV6_MAX_EXT 4
#define IPV6_FRAG_OFFSET 0xfff8 /* of the Fragment header's octets 2-3 */

#endif

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
 * five 8-byte stores, its addresses (source, destination) copied from the
 * 8-byte aligned addrs, and returns the sum of its pseudo-header (RFC 8200
 * 8.1) as csum_to_end sums it, from addrs_sum, the sum of the addresses
 * summed so: nothing is read back from the frame, and each packet adds
 * only its length to the addresses' sum. */
INLINE __u64 ipv6_write_udp(void *ip6, __u16 payload_len, __u8 tclass, const __u64 *addrs, __u64 addrs_sum)
{
	__u64 *w = ip6;
	/* Version and traffic class; payload length, next header, hop limit. */
	__u32 first = bpf_htonl(0x60000000 | (__u32)tclass << 20);
	__u32 second = bpf_htons(payload_len) | (__u32)IPPROTO_UDP << 16 | (__u32)64 << 24;
	w[0] = first | (__u64)second << 32;
#pragma unroll
	for (int i = 0; i < 4; i++)
		w[1 + i] = addrs[i];
	return addrs_sum + bpf_htonl(payload_len) + bpf_htonl(IPPROTO_UDP);
}

/* Extension headers skipped to find the upper-layer header; a longer chain
 * is left unparsed. */
#define IPV6_MAX_EXT 4
#define IPV6_FRAG_OFFSET 0xfff8 /* of the Fragment header's octets 2-3 */

#endif

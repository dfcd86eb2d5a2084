/* Internet checksums (RFC 1071) and their incremental updates (RFC 1624). */
#ifndef XDP5G_CSUM_H
#define XDP5G_CSUM_H

#include "common.h"
#include <linux/ip.h>
#include <linux/udp.h>

/* Folds a 32-bit sum of 16-bit words into the one's complement checksum. */
INLINE __u16 csum_fold(__u32 sum)
{
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)~sum;
}

/* Checksum of an option-less IPv4 header whose check field is zero. */
INLINE __u16 ipv4_csum(struct iphdr *ip)
{
	__u16 *w = (__u16 *)ip;
	__u32 sum = 0;
#pragma unroll
	for (int i = 0; i < (int)sizeof(*ip) / 2; i++)
		sum += w[i];
	return csum_fold(sum);
}

/* A checksum updated for a 32-bit field changed from from to to. */
INLINE __u16 csum_replace4(__u16 check, __be32 from, __be32 to)
{
	__u32 sum = (__u16)~check + (__u16)~(from & 0xffff) + (__u16)~(from >> 16) + (to & 0xffff) + (to >> 16);
	return csum_fold(sum);
}

/* A UDP checksum updated for an address of its pseudo-header changed; a
 * checksum of 0 (none, over IPv4) stays. */
INLINE void udp_readdress(struct udphdr *udp, const void *from, const void *to, __u32 size)
{
	if (!udp->check)
		return;
	__s64 sum = bpf_csum_diff((__be32 *)from, size, (__be32 *)to, size, (__u16)~udp->check);
	if (sum < 0)
		return;
	__u16 check = csum_fold(sum);
	udp->check = check ? check : 0xffff;
}

#endif

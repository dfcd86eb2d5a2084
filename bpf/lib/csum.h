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

/* A sum of 32-bit words folded into the 32 bits csum_fold takes. */
INLINE __u32 csum_fold64(__u64 sum)
{
	sum = (sum & 0xffffffff) + (sum >> 32);
	return (sum & 0xffffffff) + (sum >> 32);
}

/* The one's complement negation of a sum of 32-bit words below 2^48,
 * unfolded: 0xffff << 32 is a multiple of 0xffff (2^16 is 1 to it), so
 * the difference is the negation to csum_fold, without folding the sum
 * first. */
INLINE __u64 csum_neg(__u64 sum)
{
	return (0xffffULL << 32) - sum;
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

/* The one's complement sum of the bytes from p to end, the packet's end,
 * unfolded: whole chunks of 256 bytes by bpf_csum_diff (the kernel's
 * csum_partial), the rest by 8-byte words, then the last bytes, cheaper than
 * a helper call for the less than 256 bytes a small packet has. Bytes are
 * summed as 16-bit words in memory order (little-endian): the folded sum
 * stored as is is the checksum in network order. -1 when the packet is
 * longer than CSUM_CHUNKS chunks, more than a single-buffer XDP frame
 * holds. */
#define CSUM_CHUNK 256
#define CSUM_CHUNKS 16
INLINE __s64 csum_to_end(void *p, void *end)
{
	__s64 sum = 0;
	for (int i = 0; i < CSUM_CHUNKS; i++) {
		/* Kept in a register of its own: computed from i instead, the
		 * pointer would lose the bounds the verifier learnt of it. */
		asm volatile("" : "+r"(p));
		if (p + CSUM_CHUNK > end)
			break;
		sum = bpf_csum_diff(NULL, 0, p, CSUM_CHUNK, sum);
		p += CSUM_CHUNK;
	}
	if (p + CSUM_CHUNK <= end || sum < 0)
		return -1;
	__u64 acc = (__u32)sum;
	for (int i = 0; i < CSUM_CHUNK / 8; i++) {
		asm volatile("" : "+r"(p));
		if (p + 8 > end)
			break;
		__u64 w = *(__u64 *)p;
		acc += (w & 0xffffffff) + (w >> 32);
		p += 8;
	}
	if (p + 4 <= end) {
		acc += *(__u32 *)p;
		p += 4;
	}
	if (p + 2 <= end) {
		acc += *(__u16 *)p;
		p += 2;
	}
	if (p + 1 <= end)
		acc += *(__u8 *)p; /* the low byte of a little-endian word: padded with zero */
	return csum_fold64(acc);
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

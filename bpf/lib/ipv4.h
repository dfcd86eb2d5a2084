/* IPv4 headers: fragments, the header the encapsulation writes, TTL. */
#ifndef XDP5G_IPV4_H
#define XDP5G_IPV4_H

#include "common.h"
#include "csum.h"
#include <linux/ip.h>

#define IP_MF 0x2000
#define IP_OFFSET 0x1fff

/* Writes an option-less IPv4 header of a UDP datagram (TTL 64, ID 0, no
 * flags) with whole-word stores and the checksum summed from registers
 * rather than read back from the packet: the encapsulation fast path. */
INLINE void ipv4_write_udp(struct iphdr *ip, __u16 tot_len, __u8 tos, __be32 saddr, __be32 daddr)
{
	__u16 *w = (__u16 *)ip;
	__be16 len = bpf_htons(tot_len);
	__be16 w0 = bpf_htons(0x4500 | tos);
	__u32 sum = w0 + len + bpf_htons(64 << 8 | IPPROTO_UDP) + (saddr & 0xffff) + (saddr >> 16) +
		    (daddr & 0xffff) + (daddr >> 16);
	w[0] = w0;
	w[1] = len;
	w[2] = 0;
	w[3] = 0;
	w[4] = bpf_htons(64 << 8 | IPPROTO_UDP);
	w[5] = csum_fold(sum);
	ip->saddr = saddr;
	ip->daddr = daddr;
}

INLINE int ipv4_is_fragment(const struct iphdr *ip)
{
	return ip->frag_off & bpf_htons(IP_MF | IP_OFFSET);
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

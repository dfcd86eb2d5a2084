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

/* Extension headers skipped to find the upper-layer header; a longer chain
 * is left unparsed. */
#define IPV6_MAX_EXT 4
#define IPV6_FRAG_OFFSET 0xfff8 /* of the Fragment header's octets 2-3 */

#endif

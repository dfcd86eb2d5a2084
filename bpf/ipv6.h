/* IPv6 fixed header. */
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

#endif

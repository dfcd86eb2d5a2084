/* Includes and small helpers every xdp5g BPF program shares. */
#ifndef XDP5G_COMMON_H
#define XDP5G_COMMON_H

#include <linux/types.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define INLINE static __always_inline
#define NSEC_PER_SEC 1000000000ULL

/* A read position inside the packet; every parse step checks it against end. */
struct cursor {
	void *pos;
	void *end;
};

/* Points the pointer m at the metadata right before the packet of ctx (an
 * XDP or a TC context): true when it holds a whole *m. A condition, not a
 * pointer that may be NULL, so that no NULL check follows it. */
#define read_meta(ctx, m)                                       \
	({                                                      \
		(m) = (void *)(long)(ctx)->data_meta;           \
		(void *)((m) + 1) <= (void *)(long)(ctx)->data; \
	})

/* Makes room for a *m of metadata right before an XDP packet and points m
 * at it: false when the driver has no room. */
#define push_meta(ctx, m) (!bpf_xdp_adjust_meta(ctx, -(int)sizeof(*(m))) && read_meta(ctx, m))

/* The parse step of a fixed-size header: a pointer to the header at the
 * cursor, which moves past it, or NULL when the packet is too short. */
#define cursor_take(c, type)                                   \
	({                                                     \
		type *__p = (c)->pos;                          \
		if ((void *)(__p + 1) > (c)->end)              \
			__p = NULL;                            \
		else                                           \
			(c)->pos = (void *)(__p + 1);          \
		__p;                                           \
	})

#endif

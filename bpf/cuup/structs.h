/* What the CU-UP classifier's maps hold and what it leaves before each
 * packet it hands an AF_XDP socket, shared with the Go side (bpf2go
 * generates the Go side of each struct). */
#ifndef XDP5G_CUUP_STRUCTS_H
#define XDP5G_CUUP_STRUCTS_H

#include "../lib/common.h"
#include "consts.h"

/* A CU-UP tunnel endpoint: TEIDs are allocated per role. */
struct cuup_tunnel_key {
	__be32 teid; /* as on the wire */
	__u32 role;  /* enum cuup_role */
};

struct cuup_tunnel {
	__u32 bearer; /* user space's index: a PDU session's on N3, a DRB's on F1-U */
};

/* What xdp_cuup leaves in the XDP metadata, right before the frame, of a
 * packet it redirects: what user space would otherwise parse again. Offsets
 * count from the frame's first octet, numbers are in host order. */
struct cuup_meta {
	__u32 magic;     /* CUUP_META_MAGIC */
	__u32 bearer;    /* cuup_tunnel.bearer */
	__u32 teid;
	__u16 tpdu_off;  /* the T-PDU: the user packet (N3) or PDCP PDU (F1-U) */
	__u16 tpdu_len;  /* 0 on F1-U for an NR RAN Container alone */
	__u16 ran_off;   /* NR RAN Container content, when CUUP_META_NR_RAN */
	__u16 ran_len;
	__u16 ip_off;    /* the outer IP header */
	__u16 gtpu_off;  /* the GTP-U header */
	__u8 ip_version; /* of the outer IP header: 4 or 6 */
	__u8 role;       /* enum cuup_role */
	__u8 qfi;        /* when CUUP_META_PSC */
	__u8 flags;      /* enum cuup_meta_flags */
};

#endif

/* GTP-U (TS 29.281) and the PDU Session Container (TS 38.415). */
#ifndef XDP5G_GTPU_H
#define XDP5G_GTPU_H

#include "common.h"

#define GTPU_PORT 2152

#define GTPU_VERSION_MASK 0xe0
#define GTPU_V1 0x20
#define GTPU_PT 0x10
#define GTPU_E 0x04
#define GTPU_S 0x02
#define GTPU_PN 0x01

#define GTPU_ECHO_REQUEST 1
#define GTPU_ECHO_RESPONSE 2
#define GTPU_G_PDU 255

#define GTPU_EXT_NR_RAN_CONTAINER 0x84 /* TS 38.425 NR-U frames, on F1-U */
#define GTPU_EXT_PDU_SESSION_CONTAINER 0x85
#define GTPU_IE_RECOVERY 14

/* Longest extension chain we walk before declaring the packet malformed. */
#define GTPU_MAX_EXT 8

struct gtpu_hdr {
	__u8 flags;
	__u8 type;
	__be16 length; /* bytes after these 8 */
	__be32 teid;
};

/* Present when any of E, S, PN is set. */
struct gtpu_opt {
	__be16 seq;
	__u8 npdu;
	__u8 next_ext;
};

/* PDU Session Container content (TS 38.415 5.5.2): the PDU type in the high
 * nibble of its first octet; in a downlink one, PPP, RQI and the QFI in the
 * second. */
#define GTPU_PSC_DL 0
#define GTPU_PSC_UL 1
#define GTPU_PSC_PPP 0x80
#define GTPU_PSC_RQI 0x40
#define GTPU_PSC_QFI 0x3f

/* Downlink PDU Session Container: one 4-byte extension header. */
struct gtpu_pdu_session_dl {
	__u8 length;  /* 1: four bytes */
	__u8 pdu_type; /* 0: DL PDU SESSION INFORMATION */
	__u8 qfi;      /* PPP, RQI, QFI */
	__u8 next_ext;
};

#endif

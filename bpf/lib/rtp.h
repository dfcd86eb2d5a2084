/* RTP (RFC 3550), recognised by its first octets, and the payload header of
 * H.265 over RTP (RFC 7798). */
#ifndef XDP5G_RTP_H
#define XDP5G_RTP_H

#include "common.h"

struct rtp_hdr {
	__u8 vpxcc; /* version (2 bits), padding, extension, CSRC count (4 bits) */
	__u8 mpt;   /* marker, payload type (7 bits) */
	__be16 seq;
	__be32 timestamp;
	__be32 ssrc;
}; /* then CSRC count CSRCs, then an extension header when X is set */

#define RTP_VERSION 2
#define RTP_X 0x10
/* A longer header (with CSRCs and extension) is taken for something else. */
#define RTP_MAX_HDR 256

/* An RTP packet's payload type is a static one (0 to 34) or a dynamic one
 * (96 to 127); 72 to 76 with the marker set are RTCP (RFC 5761 4). */
INLINE int rtp_payload_type_plausible(__u8 pt)
{
	return pt <= 34 || pt >= 96;
}

/* H.265 payload header: F (1 bit), Type (6), LayerId (6), TID (3). */
#define H265_TYPE(b0) (((b0) >> 1) & 0x3f)
#define H265_LAYER_ID(b0, b1) ((((b0)&1) << 5) | ((b1) >> 3))
#define H265_TID_PLUS1(b1) ((b1)&7)
#define H265_AP 48 /* aggregation packet: 2-octet sizes before each NAL unit */
#define H265_FU 49 /* fragmentation unit: an FU header carries the NAL type */

#endif

/* SCTP (RFC 9260): the common header's ports. */
#ifndef XDP5G_SCTP_H
#define XDP5G_SCTP_H

#include "common.h"

struct sctp_common_hdr {
	__be16 source;
	__be16 dest;
	__be32 vtag;
	__le32 checksum;
};

#endif

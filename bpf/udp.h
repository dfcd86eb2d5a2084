/* UDP. */
#ifndef XDP5G_UDP_H
#define XDP5G_UDP_H

#include "common.h"
#include <linux/udp.h>

#endif

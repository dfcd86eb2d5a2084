package upfxdp

//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -idirafter /usr/include/x86_64-linux-gnu -idirafter /usr/include/aarch64-linux-gnu" -target bpfel -type pdr -type sdf_set -type sdf_filter -type qer -type token_bucket -type urr -type pdr_set -type set_key -type far -type nexthop -type counter -type iface -type route4_key -type route6_key upf ../../../bpf/upf.c

package cuupxdp

//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -idirafter /usr/include/x86_64-linux-gnu -idirafter /usr/include/aarch64-linux-gnu" -target bpfel -type cuup_tunnel_key -type cuup_tunnel cuup ../../../bpf/cuup.c

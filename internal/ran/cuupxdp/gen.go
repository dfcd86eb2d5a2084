package cuupxdp

//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -idirafter /usr/include/x86_64-linux-gnu -idirafter /usr/include/aarch64-linux-gnu" -target bpfel -type cuup_tunnel_key -type cuup_tunnel -type cuup_meta -type cuup_role -type cuup_reason -type cuup_meta_flags -type cuup_meta_magic cuup ../../../bpf/cuup/cuup.c

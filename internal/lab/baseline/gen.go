package baseline

//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -idirafter /usr/include/x86_64-linux-gnu -idirafter /usr/include/aarch64-linux-gnu" -target bpfel baseline ../../../bpf/lab/baseline.c
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -idirafter /usr/include/x86_64-linux-gnu -idirafter /usr/include/aarch64-linux-gnu" -target bpfel floor ../../../bpf/lab/floor.c

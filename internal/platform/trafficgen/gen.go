package trafficgen

//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -idirafter /usr/include/x86_64-linux-gnu -idirafter /usr/include/aarch64-linux-gnu" -target bpfel -type frame -type gen_config -type stamp -type limits generator ../../../bpf/trafficgen/generator.c
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -idirafter /usr/include/x86_64-linux-gnu -idirafter /usr/include/aarch64-linux-gnu" -target bpfel -type frame -type sink_stats -type slice_delay sink ../../../bpf/trafficgen/sink.c

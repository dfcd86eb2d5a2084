package classifyxdp

//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -idirafter /usr/include/x86_64-linux-gnu -idirafter /usr/include/aarch64-linux-gnu" -target bpfel -type classify_key -type classify_state -type classify_verdict -type classify_half -type classify_mask -type classify_entry_key -type classify_cached -type classify_frag_id -type classify_egress -type counter -type slice -type bpf_cpumap_val -type cpu_load -type prio_flow -type alt_nodes -type alt_node -type token_bucket classify ../../../bpf/classify.c

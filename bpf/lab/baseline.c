// SPDX-License-Identifier: GPL-2.0
/* The least work an XDP forwarder can do: the yardsticks every benchmark is
 * measured against, and the XDP_PASS program a veth peer needs before
 * XDP_REDIRECT into it delivers. */
#include "../lib/common.h"
#include "../lib/eth.h"

char LICENSE[] SEC("license") = "GPL";

/* Egress for xdp_redirect_baseline: interface and MACs. */
volatile const __u32 redirect_ifindex = 0;
volatile const __u8 redirect_dmac[ETH_ALEN] = {};
volatile const __u8 redirect_smac[ETH_ALEN] = {};

SEC("xdp")
int xdp_tx_baseline(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > (void *)(long)ctx->data_end)
		return XDP_DROP;
	swap_eth(eth);
	return XDP_TX;
}

SEC("xdp")
int xdp_redirect_baseline(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > (void *)(long)ctx->data_end)
		return XDP_DROP;
	/* Element by element: a memcpy that casts volatile away lets clang
	 * fold the constants to their zero initializers. */
	for (int i = 0; i < ETH_ALEN; i++) {
		eth->h_dest[i] = redirect_dmac[i];
		eth->h_source[i] = redirect_smac[i];
	}
	return bpf_redirect(redirect_ifindex, 0);
}

SEC("xdp")
int xdp_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

// Command xdp5g-lab is the lab of xdp5g: the benchmarks that measure the
// product's data paths and control plane against baselines of the same run.
// It is kept apart from the xdp5g binary, which links none of it.
package main

import (
	"github.com/spf13/cobra"

	"github.com/xdp5g/xdp5g/internal/cli"
	"github.com/xdp5g/xdp5g/internal/lab/bench"
	"github.com/xdp5g/xdp5g/internal/platform/gcpace"
)

func main() { cli.Main(newRoot()) }

// newRoot declares every command of xdp5g-lab.
func newRoot() *cobra.Command {
	var flags *bench.Flags
	benchCmd := cli.Command("bench", `measure the data paths and the control plane and print a markdown report

Bench measures what the UPF's data path costs per packet and how many packets
it forwards, each next to minimal XDP forwarders measured in the same run; or,
with --pfcp, --classify, --slicing, --slicing-upf or --cuup, that part of the
product instead. It needs root: it builds network namespaces and loads XDP
programs, and removes what it built before it returns. Progress goes to the
standard error.`, cobra.NoArgs,
		func(c *cobra.Command, _ []string) error {
			gcpace.Tune() // the benchmarks measure the daemon's code, so with its collector
			return flags.Run(c.Context(), c.OutOrStdout())
		})
	flags = bench.AddFlags(benchCmd.Flags())
	return cli.Group("xdp5g-lab", `xdp5g-lab is the lab of xdp5g: benchmarks that measure the product against
baselines of the same run.`, benchCmd)
}

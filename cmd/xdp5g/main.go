// Command xdp5g is the XDP-accelerated 5G user plane: the daemon, a client
// for its REST API, and the demonstration.
package main

import (
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/xdp5g/xdp5g/internal/api"
	"github.com/xdp5g/xdp5g/internal/cli"
	"github.com/xdp5g/xdp5g/internal/config"
	"github.com/xdp5g/xdp5g/internal/daemon"
	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/platform/gcpace"
)

func main() { cli.Main(newRoot()) }

// newRoot declares every command of xdp5g.
func newRoot() *cobra.Command {
	root := cli.Group("xdp5g", `xdp5g is an XDP-accelerated user plane for 5G: a UPF with PFCP N4, a classifier
of nested multi-tenant traffic, slicing and inner-flow CPU steering driven by
intents, and a CU-UP fast path.`)
	addGroup(root, "Daemon:", runCommand(), detachCommand())
	clients := clientCommands()
	for _, c := range clients {
		clientFlags(c)
	}
	addGroup(root, "Client of a running daemon (each takes --api URL, default "+api.DefaultURL+", and --token-file, --ca-file):", clients...)
	addGroup(root, "Demonstration:", cli.Command("demo", `run the end-to-end demonstration

Demo builds a gNB, the UPF and a data network in network namespaces of its
own and sends two million packets each way through xdp_upf, printing the rates
and the packets as they arrived; then a UPF, the CU-UP and a DU, a UE's traffic
through the CU-UP's AF_XDP path with NEA2 and NIA2 both ways. It needs root,
takes under a minute, and removes everything it created when it ends, on an
error or Ctrl-C too.`, cobra.NoArgs,
		func(c *cobra.Command, _ []string) error { return demo.Run(c.Context(), c.OutOrStdout()) }))
	return root
}

// addGroup adds cmds to root under a title of its help.
func addGroup(root *cobra.Command, title string, cmds ...*cobra.Command) {
	root.AddGroup(&cobra.Group{ID: title, Title: title})
	for _, c := range cmds {
		c.GroupID = title
	}
	root.AddCommand(cmds...)
}

func runCommand() *cobra.Command {
	run := cli.Command("run", `attach the data path and serve the REST API until SIGINT, SIGTERM or SIGHUP

Run attaches the data path, takes over the saved sessions and serves the REST
API (and PFCP, with a pfcp section; a CU-UP, with a cuup section) until SIGINT,
SIGTERM or SIGHUP (there is no reload: each saves the state and stops). GET
/healthz answers from the start, GET /readyz once everything serves. The XDP
programs of the UPF and the classifier stay attached after it stops (unless
datapath.ephemeral lets them go with it).`, cobra.NoArgs, func(c *cobra.Command, _ []string) error {
		cfg, err := loadConfig(c)
		if err != nil {
			return err
		}
		log := daemonLog(c)
		slog.SetDefault(log)
		gcpace.Tune()
		return daemon.Run(c.Context(), cfg, log)
	})
	configFlag(run)
	run.Flags().Bool("debug", false, "log at debug level too: what is dropped unanswered (PFCP datagrams from peers not allowed, malformed GTP-U messages), next-hop resolution")
	return run
}

// daemonLog is the daemon's log, on c's error output: INFO and up, DEBUG
// too with --debug.
func daemonLog(c *cobra.Command) *slog.Logger {
	level := slog.LevelInfo
	if debug, _ := c.Flags().GetBool("debug"); debug {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(c.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
}

func detachCommand() *cobra.Command {
	detach := cli.Command("detach", `detach the XDP programs and remove the pinned maps (stop the daemon first)

Detach detaches the XDP programs from every interface with a pinned attachment,
configured or not, and removes the configuration's pin directory. The REST API's
saved sessions stay, so the next run installs them again.`, cobra.NoArgs, func(c *cobra.Command, _ []string) error {
		cfg, err := loadConfig(c)
		if err != nil {
			return err
		}
		return daemon.Detach(cfg)
	})
	configFlag(detach)
	return detach
}

// configFlag declares c's --config FILE, which it needs.
func configFlag(c *cobra.Command) {
	c.Flags().String("config", "", "configuration `FILE`")
	c.MarkFlagRequired("config")
}

func loadConfig(c *cobra.Command) (*config.Config, error) {
	path, _ := c.Flags().GetString("config")
	return config.Load(path)
}

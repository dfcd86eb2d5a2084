// Command xdp5g is the XDP-accelerated 5G UPF: the daemon, a client for its
// REST API, the demo and the benchmark.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/xdp5g/xdp5g/internal/api"
	"github.com/xdp5g/xdp5g/internal/config"
	"github.com/xdp5g/xdp5g/internal/daemon"
	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/platform/gcpace"
)

const usage = `usage: xdp5g COMMAND [FLAGS] [ARGS]

Daemon:
  run --config FILE     attach the data path, take over the saved sessions and
                        serve the REST API (and PFCP, with a pfcp section; a
                        CU-UP, with a cuup section) until SIGINT or SIGTERM;
                        the XDP programs of the UPF and the classifier stay
                        attached after it stops
  detach --config FILE  detach the XDP programs from all interfaces and remove
                        the pinned maps (stop the daemon first)

Client of a running daemon; each takes --api URL (default ` + api.DefaultURL + `)
after its command words, e.g. xdp5g sessions get --api http://upf:9880 1:
  sessions list         print every session, SMFs' (PFCP) ones included
  sessions get SEID     print a session with its PDRs' counters
  sessions add FILE     install the session of a JSON document (- for stdin)
  sessions replace FILE replace the session with the document's seid
  sessions delete SEID  remove a session
                        (replace and delete refuse sessions an SMF created)
  stats                 print the per-interface counters that are not zero
  associations          print the PFCP associations with SMFs
  associations release NODE
                        ask the SMF with that Node ID to release its
                        association (it moves or deletes its sessions first)
  rules list            print the classification rules with their counters
  rules get ID          print a rule with its counters
  rules add FILE        install the rule of a JSON document (- for stdin)
  rules delete ID       remove a rule
  rules clear           remove every rule
  rules count           print the number of rules
  slices list           print the slices steer rules spread flows over, with
                        what each CPU took
  slices set ID CPU,... create a slice or change its CPUs
  slices delete ID      remove a slice no rule steers to
  intents list          print the installed intents with their statistics
  intents get ID        print an intent with its statistics
  intents add FILE      carry out an intent document (- for stdin): INSERT
                        or DELETE, as its Action says
  intents delete ID     remove an intent and what it installed
  bearer-contexts list  print the CU-UP's bearer contexts with their DRBs'
                        statistics
  bearer-contexts get ID
                        print a bearer context (its gNB-CU-UP UE E1AP ID)
  bearer-contexts setup FILE
                        set up the bearer context of a JSON Bearer Context
                        Setup Request (- for stdin); prints the response
  bearer-contexts modify ID FILE
                        modify a bearer context as a JSON Bearer Context
                        Modification Request says (- for stdin)
  bearer-contexts release ID
                        release a bearer context
  cuup-stats            print the CU-UP's counters: each worker's and, on the
                        AF_XDP path, those of its XDP classifier that are not
                        zero, per CPU

Demonstration:
  demo                  run the end-to-end demonstration
`

// errUsage asks main to print the usage.
var errUsage = errors.New("usage")

func main() {
	// A reader of the output that goes away (`xdp5g demo | head`) must
	// not kill the process before it removes its namespaces and pins:
	// with SIGPIPE ignored, the writes fail instead.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	switch {
	case errors.Is(err, errUsage):
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	case err != nil:
		fmt.Fprintln(os.Stderr, "xdp5g:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errUsage
	}
	cmd, args := args[0], args[1:]
	switch cmd {
	case "run", "detach":
		cfg, err := loadConfig(cmd, args)
		if err != nil {
			return err
		}
		if cmd == "detach" {
			return daemon.Detach(cfg)
		}
		log := slog.New(slog.NewTextHandler(os.Stderr, nil))
		slog.SetDefault(log)
		gcpace.Tune()
		return daemon.Run(ctx, cfg, log)
	case "sessions", "stats", "associations", "rules", "slices", "intents", "bearer-contexts", "cuup-stats":
		return client(ctx, cmd, args)
	case "demo":
		return demo.Run(ctx, os.Stdout)
	case "help", "-h", "--help":
		fmt.Print(usage)
		return nil
	}
	return errUsage
}

func loadConfig(cmd string, args []string) (*config.Config, error) {
	flags := flag.NewFlagSet(cmd, flag.ContinueOnError)
	flags.Usage = func() {}
	path := flags.String("config", "", "configuration file")
	if err := flags.Parse(args); err != nil || *path == "" || flags.NArg() != 0 {
		return nil, errUsage
	}
	return config.Load(*path)
}

// client runs a client command: COMMAND [SUBCOMMAND] [--api URL] [ARGS],
// as the usage lists them.
func client(ctx context.Context, cmd string, args []string) error {
	withSubcommand := []string{"sessions", "rules", "slices", "intents", "bearer-contexts"}
	switch {
	case slices.Contains(withSubcommand, cmd) && len(args) == 0:
		return errUsage
	case slices.Contains(withSubcommand, cmd), cmd == "associations" && len(args) > 0 && args[0] == "release":
		cmd, args = cmd+" "+args[0], args[1:]
	}
	flags := flag.NewFlagSet(cmd, flag.ContinueOnError)
	flags.Usage = func() {}
	url := flags.String("api", api.DefaultURL, "REST API of the daemon")
	if err := flags.Parse(args); err != nil {
		return errUsage
	}
	c := &api.Client{URL: *url, HTTP: &http.Client{Timeout: 30 * time.Second}}
	arg := flags.Arg(0)
	// The number of arguments of each command.
	wantArgs := map[string]int{"stats": 0, "associations": 0, "associations release": 1,
		"rules list": 0, "rules get": 1, "rules add": 1, "rules delete": 1, "rules clear": 0, "rules count": 0,
		"slices list": 0, "slices set": 2, "slices delete": 1,
		"intents list": 0, "intents get": 1, "intents add": 1, "intents delete": 1,
		"sessions list": 0, "sessions get": 1, "sessions add": 1, "sessions replace": 1, "sessions delete": 1,
		"bearer-contexts list": 0, "bearer-contexts get": 1, "bearer-contexts setup": 1, "bearer-contexts modify": 2,
		"bearer-contexts release": 1, "cuup-stats": 0}
	if n, ok := wantArgs[cmd]; !ok || flags.NArg() != n {
		return errUsage
	}
	switch cmd {
	case "stats":
		st, err := c.Stats(ctx)
		if err != nil {
			return err
		}
		return st.WriteTable(os.Stdout)
	case "associations":
		a, err := c.Associations(ctx)
		if err != nil {
			return err
		}
		return a.WriteTable(os.Stdout)
	case "associations release":
		return c.Release(ctx, arg)
	case "rules list":
		return printJSON(c.Rules(ctx))
	case "rules count":
		return printJSON(c.RuleCount(ctx))
	case "rules clear":
		return c.ClearRules(ctx)
	case "rules get", "rules delete":
		id, err := parseID(arg, "a rule")
		if err != nil {
			return err
		}
		if cmd == "rules get" {
			return printJSON(c.Rule(ctx, id))
		}
		return c.DeleteRule(ctx, id)
	case "rules add":
		doc, err := readDocument(arg)
		if err != nil {
			return err
		}
		return printJSON(c.AddRule(ctx, doc))
	case "intents list":
		return printJSON(c.Intents(ctx))
	case "intents get", "intents delete":
		id, err := parseID(arg, "an intent")
		if err != nil {
			return err
		}
		if cmd == "intents delete" {
			return c.DeleteIntent(ctx, id)
		}
		return printJSON(c.Intent(ctx, id))
	case "intents add":
		doc, err := readDocument(arg)
		if err != nil {
			return err
		}
		return printJSON(c.PostIntent(ctx, doc))
	case "slices list":
		return printJSON(c.Slices(ctx))
	case "slices set", "slices delete":
		id, err := parseID(arg, "a slice")
		if err != nil {
			return err
		}
		if cmd == "slices delete" {
			return c.DeleteSlice(ctx, id)
		}
		var cpus []uint32
		for _, f := range strings.Split(flags.Arg(1), ",") {
			cpu, err := strconv.ParseUint(f, 10, 32)
			if err != nil {
				return fmt.Errorf("%q is not a CPU number", f)
			}
			cpus = append(cpus, uint32(cpu))
		}
		return printJSON(c.SetSlice(ctx, id, cpus))
	case "cuup-stats":
		st, err := c.CUUPStats(ctx)
		if err != nil {
			return err
		}
		return st.WriteTable(os.Stdout)
	case "bearer-contexts list":
		return printJSON(c.BearerContexts(ctx))
	case "bearer-contexts setup":
		doc, err := readDocument(arg)
		if err != nil {
			return err
		}
		return printJSON(c.SetupBearerContext(ctx, doc))
	case "bearer-contexts get", "bearer-contexts modify", "bearer-contexts release":
		id, err := parseID(arg, "a bearer context")
		if err != nil {
			return err
		}
		switch cmd {
		case "bearer-contexts get":
			return printJSON(c.BearerContext(ctx, id))
		case "bearer-contexts release":
			return c.ReleaseBearerContext(ctx, id)
		}
		doc, err := readDocument(flags.Arg(1))
		if err != nil {
			return err
		}
		return printJSON(c.ModifyBearerContext(ctx, id, doc))
	case "sessions list":
		return printJSON(c.Sessions(ctx))
	case "sessions get":
		seid, err := parseSEID(arg)
		if err != nil {
			return err
		}
		return printJSON(c.Session(ctx, seid))
	case "sessions delete":
		seid, err := parseSEID(arg)
		if err != nil {
			return err
		}
		return c.Delete(ctx, seid)
	}
	doc, err := readDocument(arg)
	if err != nil {
		return err
	}
	if cmd == "sessions add" {
		return printJSON(c.Create(ctx, doc))
	}
	return printJSON(c.Replace(ctx, doc))
}

func parseSEID(s string) (uint64, error) {
	seid, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a SEID", s)
	}
	return seid, nil
}

// parseID reads the ID of what a command names.
func parseID(arg, what string) (uint32, error) {
	id, err := strconv.ParseUint(arg, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%q is not %s ID", arg, what)
	}
	return uint32(id), nil
}

func readDocument(path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(os.Stdin)
	}
	return os.ReadFile(path)
}

func printJSON(doc json.RawMessage, err error) error {
	if err != nil {
		return err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, doc, "", "  "); err != nil {
		return err
	}
	out.WriteByte('\n')
	_, err = out.WriteTo(os.Stdout)
	return err
}

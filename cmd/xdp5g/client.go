package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/xdp5g/xdp5g/internal/api"
	"github.com/xdp5g/xdp5g/internal/cli"
)

// clientCommands are the commands that call a running daemon's REST API.
func clientCommands() []*cobra.Command {
	none, one, two := cobra.NoArgs, cobra.ExactArgs(1), cobra.ExactArgs(2)
	associations := cli.Command("associations", "print the PFCP associations with SMFs", none,
		showTable((*api.Client).Associations))
	associations.AddCommand(cli.Command("release NODE", `ask the SMF with that Node ID to release its association

The SMF moves or deletes its sessions first.`, one,
		withClient(func(c *cobra.Command, cl *api.Client, args []string) error { return cl.Release(c.Context(), args[0]) })))
	stages := cli.Command("stages NAME STAGE,...", `change the stages an interface of the UPF runs, the UPF last

For example "stages n3 classify,steer,upf --slice 1", or "stages n3 upf" for
the UPF alone. The change takes effect at once, without a packet lost, and is
kept across restarts until the configuration gives the interface other stages.`, two, withClient(setStages))
	stages.Flags().Uint32("slice", 0, "`ID` of the slice the steer stage sends packets to (default: the interface's)")
	return []*cobra.Command{
		cli.Group("interfaces", "the UPF's interfaces and the stages each runs",
			cli.Command("list", "print the UPF's interfaces with their stages, as running and as configured", none,
				show((*api.Client).Interfaces)),
			stages),
		cli.Group("sessions", "the UPF's sessions, SMFs' (PFCP) ones included",
			cli.Command("list", "print every session, SMFs' (PFCP) ones included", none, show((*api.Client).Sessions)),
			cli.Command("get SEID", "print a session with its PDRs' counters", one, showByID(parseSEID, (*api.Client).Session)),
			cli.Command("add FILE", "install the session of a JSON document (- for stdin)", one, send((*api.Client).Create)),
			cli.Command("replace FILE", `replace the session with the document's seid (- for stdin)

Sessions an SMF created are refused.`, one, send((*api.Client).Replace)),
			cli.Command("delete SEID", `remove a session

Sessions an SMF created are refused.`, one, deleteByID(parseSEID, (*api.Client).Delete))),
		cli.Command("stats", "print the per-interface counters that are not zero", none, showTable((*api.Client).Stats)),
		associations,
		cli.Group("rules", "the classification rules",
			cli.Command("list", "print the classification rules with their counters", none, show((*api.Client).Rules)),
			cli.Command("get ID", "print a rule with its counters", one, showByID(idOf("a rule"), (*api.Client).Rule)),
			cli.Command("add FILE", "install the rule of a JSON document (- for stdin)", one, send((*api.Client).AddRule)),
			cli.Command("delete ID", "remove a rule", one, deleteByID(idOf("a rule"), (*api.Client).DeleteRule)),
			cli.Command("clear", "remove every rule but those intents installed", none,
				withClient(func(c *cobra.Command, cl *api.Client, _ []string) error { return cl.ClearRules(c.Context()) })),
			cli.Command("count", "print the number of rules", none, show((*api.Client).RuleCount))),
		cli.Group("slices", "the slices steer rules spread flows over",
			cli.Command("list", "print the slices with what each CPU took", none, show((*api.Client).Slices)),
			cli.Command("set ID CPU,...", "create a slice or change its CPUs", two, withClient(setSlice)),
			cli.Command("delete ID", "remove a slice no rule steers to", one, deleteByID(idOf("a slice"), (*api.Client).DeleteSlice))),
		cli.Group("intents", "the intents that drive slicing and offload",
			cli.Command("list", "print the installed intents with their statistics", none, show((*api.Client).Intents)),
			cli.Command("get ID", "print an intent with its statistics", one, showByID(idOf("an intent"), (*api.Client).Intent)),
			cli.Command("add FILE", "carry out an intent document (- for stdin): INSERT or DELETE, as its Action says", one,
				send((*api.Client).PostIntent)),
			cli.Command("delete ID", "remove an intent and what it installed", one,
				deleteByID(idOf("an intent"), (*api.Client).DeleteIntent))),
		cli.Group("bearer-contexts", "the CU-UP's bearer contexts",
			cli.Command("list", "print the bearer contexts with their DRBs' statistics", none, show((*api.Client).BearerContexts)),
			cli.Command("get ID", "print a bearer context (ID is its gNB-CU-UP UE E1AP ID)", one,
				showByID(idOf("a bearer context"), (*api.Client).BearerContext)),
			cli.Command("setup FILE", "set up the bearer context of a JSON Bearer Context Setup Request (- for stdin); print the response",
				one, send((*api.Client).SetupBearerContext)),
			cli.Command("modify ID FILE", "modify a bearer context as a JSON Bearer Context Modification Request says (- for stdin)",
				two, withClient(modifyBearerContext)),
			cli.Command("release ID", "release a bearer context", one,
				deleteByID(idOf("a bearer context"), (*api.Client).ReleaseBearerContext))),
		cli.Command("cuup-stats", `print the CU-UP's counters

Each worker's counters; those of the socket path and of the AF_XDP path
(sent through the kernel, dropped with the TX ring full, ...) that are not
zero; and, on the AF_XDP path, those of its XDP classifier that are not zero,
per CPU.`, none, showTable((*api.Client).CUUPStats)),
	}
}

func setSlice(c *cobra.Command, cl *api.Client, args []string) error {
	id, err := idOf("a slice")(args[0])
	if err != nil {
		return err
	}
	var cpus []uint32
	for _, f := range strings.Split(args[1], ",") {
		cpu, err := strconv.ParseUint(f, 10, 32)
		if err != nil {
			return fmt.Errorf("%q is not a CPU number", f)
		}
		cpus = append(cpus, uint32(cpu))
	}
	return printJSON(c)(cl.SetSlice(c.Context(), id, cpus))
}

// setStages changes an interface's stages; without --slice it keeps the
// slice the interface steers to (PUT replaces both).
func setStages(c *cobra.Command, cl *api.Client, args []string) error {
	set := api.StageSet{Stages: strings.Split(args[1], ",")}
	if c.Flags().Changed("slice") {
		set.Slice, _ = c.Flags().GetUint32("slice")
	} else {
		doc, err := cl.Interface(c.Context(), args[0])
		if err != nil {
			return err
		}
		var running api.InterfaceStages
		if err := json.Unmarshal(doc, &running); err != nil {
			return err
		}
		set.Slice = running.Slice
	}
	return printJSON(c)(cl.SetStages(c.Context(), args[0], set))
}

func modifyBearerContext(c *cobra.Command, cl *api.Client, args []string) error {
	id, err := idOf("a bearer context")(args[0])
	if err != nil {
		return err
	}
	doc, err := readDocument(c, args[1])
	if err != nil {
		return err
	}
	return printJSON(c)(cl.ModifyBearerContext(c.Context(), id, doc))
}

// action is what a command does with its arguments.
type action = func(c *cobra.Command, args []string) error

// show prints the document get answers.
func show(get func(*api.Client, context.Context) (json.RawMessage, error)) action {
	return withClient(func(c *cobra.Command, cl *api.Client, _ []string) error { return printJSON(c)(get(cl, c.Context())) })
}

// showTable prints the table of what get answers.
func showTable[T interface{ WriteTable(io.Writer) error }](get func(*api.Client, context.Context) (T, error)) action {
	return withClient(func(c *cobra.Command, cl *api.Client, _ []string) error {
		t, err := get(cl, c.Context())
		if err != nil {
			return err
		}
		return t.WriteTable(c.OutOrStdout())
	})
}

// showByID prints the document get answers for the ID of the argument.
func showByID[ID any](parse func(string) (ID, error), get func(*api.Client, context.Context, ID) (json.RawMessage, error)) action {
	return withClient(func(c *cobra.Command, cl *api.Client, args []string) error {
		id, err := parse(args[0])
		if err != nil {
			return err
		}
		return printJSON(c)(get(cl, c.Context(), id))
	})
}

// deleteByID removes what the argument's ID names.
func deleteByID[ID any](parse func(string) (ID, error), del func(*api.Client, context.Context, ID) error) action {
	return withClient(func(c *cobra.Command, cl *api.Client, args []string) error {
		id, err := parse(args[0])
		if err != nil {
			return err
		}
		return del(cl, c.Context(), id)
	})
}

// send sends the document of the file the argument names and prints the
// answer.
func send(post func(*api.Client, context.Context, []byte) (json.RawMessage, error)) action {
	return withClient(func(c *cobra.Command, cl *api.Client, args []string) error {
		doc, err := readDocument(c, args[0])
		if err != nil {
			return err
		}
		return printJSON(c)(post(cl, c.Context(), doc))
	})
}

// tokenVariable holds the API's bearer token when --token-file is not
// given.
const tokenVariable = "XDP5G_TOKEN"

// clientFlags declares the flags of a command that calls the REST API.
func clientFlags(c *cobra.Command) {
	c.PersistentFlags().String("api", api.DefaultURL, "`URL` of the daemon's REST API, http or https")
	c.PersistentFlags().String("token-file", "", "`FILE` holding the API's bearer token (without it, the token itself in $"+tokenVariable+")")
	c.PersistentFlags().String("ca-file", "", "`FILE` of PEM certificates to trust for an https URL, besides the system's")
}

// withClient runs f with the client of the REST API the command's flags
// name: --api, the token of --token-file or else of $XDP5G_TOKEN, and the
// certificates of --ca-file.
func withClient(f func(c *cobra.Command, cl *api.Client, args []string) error) action {
	return func(c *cobra.Command, args []string) error {
		url, _ := c.Flags().GetString("api")
		if u, err := neturl.Parse(url); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("--api: %q is not an http or https URL such as %s", url, api.DefaultURL)
		}
		tokenFile, _ := c.Flags().GetString("token-file")
		caFile, _ := c.Flags().GetString("ca-file")
		// Trimmed as the token file: a variable set from it may keep its newline.
		cl := &api.Client{URL: url, Token: strings.TrimSpace(os.Getenv(tokenVariable))}
		if tokenFile != "" {
			data, err := os.ReadFile(tokenFile)
			if err != nil {
				return fmt.Errorf("--token-file: %w", err)
			}
			cl.Token = strings.TrimSpace(string(data))
			if cl.Token == "" {
				return fmt.Errorf("--token-file: %s holds no token", tokenFile)
			}
		}
		transport := http.DefaultTransport.(*http.Transport).Clone()
		if caFile != "" {
			pem, err := os.ReadFile(caFile)
			if err != nil {
				return fmt.Errorf("--ca-file: %w", err)
			}
			roots, err := x509.SystemCertPool()
			if err != nil {
				return err
			}
			if !roots.AppendCertsFromPEM(pem) {
				return fmt.Errorf("--ca-file: %s holds no PEM certificate", caFile)
			}
			transport.TLSClientConfig = &tls.Config{RootCAs: roots}
		}
		cl.HTTP = &http.Client{Timeout: 30 * time.Second, Transport: transport}
		err := f(c, cl, args)
		var refused *api.Error
		if errors.As(err, &refused) && refused.Status == http.StatusUnauthorized {
			return fmt.Errorf("%w (the token: --token-file FILE, or $%s)", err, tokenVariable)
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			return fmt.Errorf("%w (no daemon listens there: xdp5g run starts one, --api names another)", err)
		}
		return err
	}
}

func parseSEID(s string) (uint64, error) {
	seid, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a SEID", s)
	}
	return seid, nil
}

// idOf reads the ID of what a command names.
func idOf(what string) func(string) (uint32, error) {
	return func(s string) (uint32, error) {
		id, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			return 0, fmt.Errorf("%q is not %s ID", s, what)
		}
		return uint32(id), nil
	}
}

// readDocument reads the file at path, or the standard input for "-".
func readDocument(c *cobra.Command, path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(c.InOrStdin())
	}
	return os.ReadFile(path)
}

// printJSON returns a function that prints a document the API answered,
// indented, to c's output.
func printJSON(c *cobra.Command) func(json.RawMessage, error) error {
	return func(doc json.RawMessage, err error) error {
		if err != nil {
			return err
		}
		var out bytes.Buffer
		if err := json.Indent(&out, doc, "", "  "); err != nil {
			return err
		}
		out.WriteByte('\n')
		_, err = out.WriteTo(c.OutOrStdout())
		return err
	}
}

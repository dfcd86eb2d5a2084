// Package cli runs the command lines of xdp5g's binaries, each a tree of
// cobra commands declared once: the signals they handle, and exit statuses
// that tell a command line that matches no usage (2) from a command that
// failed (1).
package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/xdp5g/xdp5g/internal/platform/version"
)

// Main runs root with the process's arguments and exits with its status.
// SIGINT, SIGTERM and SIGHUP cancel the commands' context: a daemon whose
// terminal goes away, or that is sent SIGHUP for a reload it does not
// have, stops as on SIGTERM, its state saved.
func Main(root *cobra.Command) {
	// A reader of the output that goes away (`xdp5g demo | head`) must
	// not kill the process before it removes its namespaces and pins:
	// with SIGPIPE ignored, the writes fail instead.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	status := Run(ctx, root, os.Args[1:])
	stop()
	os.Exit(status)
}

// Run runs root with args and returns the exit status: 0; 1 when a
// command failed; 2, with the command's usage on root's error output, when
// the command line matches no usage.
func Run(ctx context.Context, root *cobra.Command, args []string) int {
	root.SilenceErrors, root.SilenceUsage = true, true
	root.Version = version.String()
	cobra.EnableCommandSorting = false // helps list the commands as declared
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			requireCommand(c)
		}
	}
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		fmt.Fprintf(root.ErrOrStderr(), "%s: interrupted\n", root.Name())
		return 1
	}
	fmt.Fprintf(root.ErrOrStderr(), "%s: %v\n", root.Name(), err)
	if errors.As(err, new(failure)) {
		return 1
	}
	fmt.Fprint(root.ErrOrStderr(), "\n"+cmd.UsageString())
	return 2
}

// failure is the error of a command's run; every other error cobra
// returns is about the command line.
type failure struct{ err error }

func (f failure) Error() string { return f.err.Error() }
func (f failure) Unwrap() error { return f.err }

// Command declares a command that does something: use is its name and
// arguments, help's first line its line in its parent's list and the whole
// its own help, args checks its arguments, and run does it.
func Command(use, help string, args cobra.PositionalArgs, run func(c *cobra.Command, args []string) error) *cobra.Command {
	short, _, _ := strings.Cut(help, "\n")
	return &cobra.Command{Use: use, Short: short, Long: help, Args: args,
		RunE: func(c *cobra.Command, args []string) error {
			if err := run(c, args); err != nil {
				return failure{err}
			}
			return nil
		}}
}

// Group declares a command that holds the commands cmds.
func Group(use, help string, cmds ...*cobra.Command) *cobra.Command {
	short, _, _ := strings.Cut(help, "\n")
	g := &cobra.Command{Use: use, Short: short, Long: help}
	requireCommand(g)
	g.AddCommand(cmds...)
	return g
}

// requireCommand makes a group refuse to run without one of its commands,
// or with a word that is none of them; cobra would print its help and
// succeed.
func requireCommand(g *cobra.Command) {
	g.SuggestionsMinimumDistance = 2
	g.Args = func(c *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		err := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
		if s := c.SuggestionsFor(args[0]); len(s) > 0 {
			err += fmt.Sprintf("; did you mean %s?", strings.Join(s, " or "))
		}
		return errors.New(err)
	}
	g.RunE = func(c *cobra.Command, _ []string) error {
		return fmt.Errorf("%s needs a command", c.CommandPath())
	}
}

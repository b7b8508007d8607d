package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/spf13/cobra"

	"github.com/metalambda/metalambda/internal/engineapi"
	"github.com/metalambda/metalambda/internal/httpapi"
)

// Exit codes of every command.
const (
	exitOK             = 0 // done
	exitError          = 1 // anything that went wrong, a compile error included
	exitUsage          = 2 // bad command line: unknown command or flag, missing argument
	exitFunctionFailed = 3 // fn invoke: the function ran and failed (exception, timeout, bad answer)
	exitDenied         = 4 // the gateway or the engine refused the credentials (401) or the action (403)
)

const exitCodesHelp = `Exit codes: 0 done; 1 error (a compile error included); 2 bad command line;
3 the invoked function failed; 4 the gateway or the engine refused the credentials
or the action.`

// usageError is a mistake on the command line (exit 2).
type usageError struct{ error }

// streams are the command's standard files, so that tests run it in process.
type streams struct {
	in       io.Reader
	out, err io.Writer
}

// execute runs the command line and returns the process's exit code.
func execute(args []string, s streams) int {
	root := newRootCommand(s)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return exitOK
	}
	var exit *exitStatus
	if errors.As(err, &exit) {
		return exit.code
	}
	fmt.Fprintln(s.err, "metalambda:", err)
	return exitCode(err)
}

// exitStatus ends the command with a code after it printed what it had to say.
type exitStatus struct{ code int }

func (e *exitStatus) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func exitCode(err error) int {
	var usage usageError
	// cobra checks required flags before any hook of ours runs, and its error has
	// no type of its own.
	if errors.As(err, &usage) || strings.HasPrefix(err.Error(), "required flag(s) ") {
		return exitUsage
	}
	var api *httpapi.Error
	if errors.As(err, &api) && (api.Status == http.StatusUnauthorized || api.Status == http.StatusForbidden) {
		return exitDenied
	}
	if errors.Is(err, engineapi.ErrUnauthorized) || errors.Is(err, engineapi.ErrForbidden) {
		return exitDenied
	}
	return exitError
}

func newRootCommand(s streams) *cobra.Command {
	root := &cobra.Command{
		Use:   "metalambda",
		Short: "Run Metalambda on this machine and work with its functions",
		Long: `metalambda runs the whole platform on this machine (up, down), manages the
gateway's hook functions (fn), shows the engine's controllers (ctl) and syncs a
controller's parents on demand (sync).

` + exitCodesHelp,
		Example: `  metalambda up                 # as root: control plane, engine, gateway, ingress, node
  export KUBECONFIG=$PWD/.metalambda/kubeconfig
  metalambda fn init hello --runtime python
  metalambda fn apply -f hello.py
  metalambda fn invoke hello -d @sample-request.json`,
		Args:          unknownCommand,
		RunE:          func(c *cobra.Command, _ []string) error { return noCommand(c) },
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetIn(s.in)
	root.SetOut(s.out)
	root.SetErr(s.err)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(platformCommand("up", "Start the control plane, engine, gateway, ingress and local node",
		"Ctrl-C (or metalambda down) stops them; the data stays. Run \"metalambda up -h\" for its flags.", up))
	root.AddCommand(platformCommand("down", "Stop a running platform (--purge also deletes its data)",
		"Run \"metalambda down -h\" for its flags.", down))
	root.AddCommand(newFnCommand(s))
	root.AddCommand(newSyncCommand(s))
	root.AddCommand(newCtlCommand(s))
	return root
}

// platformCommand wraps up and down as they are: they parse their own flags with the
// standard library's flag package, so cobra leaves their arguments alone.
func platformCommand(name, short, long string, run func([]string) error) *cobra.Command {
	return &cobra.Command{
		Use:                name + " [flags]",
		Short:              short,
		Long:               short + ".\n" + long,
		DisableFlagParsing: true,
		RunE:               func(_ *cobra.Command, args []string) error { return run(args) },
	}
}

// unknownCommand refuses arguments to a command that only groups others.
func unknownCommand(c *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	return usageError{fmt.Errorf("unknown command %q for %q; run %q", args[0], c.CommandPath(), c.CommandPath()+" --help")}
}

// noCommand prints the usage of a command that only groups others, and fails as a
// usage error.
func noCommand(c *cobra.Command) error {
	c.SetOut(c.ErrOrStderr())
	_ = c.Usage()
	return &exitStatus{code: exitUsage}
}

// exactArgs is cobra.ExactArgs with the names of the arguments, as a usage error.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) == len(names) {
			return nil
		}
		return usageError{fmt.Errorf("%s takes %d argument(s), %s; got %d", c.CommandPath(), len(names), strings.Join(names, " "), len(args))}
	}
}

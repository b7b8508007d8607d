package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/metalambda/metalambda/internal/engineapi"
)

// recentCalls is how many hook calls `ctl get` shows.
const recentCalls = 10

// newCtlCommand is `metalambda ctl`: the controllers the engine runs, as its API
// shows them to the kubeconfig's user.
func newCtlCommand(s streams) *cobra.Command {
	c := &cobra.Command{
		Use:   "ctl",
		Short: "List and show the controllers the engine runs that you may see",
		Long: `List and show the engine's controllers through its API: the cluster-scoped
CompositeControllers and DecoratorControllers you may get, and the namespaced
controllers (NamespacedCompositeController, NamespacedDecoratorController) of the
namespaces where you may list them.

The engine's API and the credentials are found as for "metalambda sync".

` + exitCodesHelp,
		Args: unknownCommand,
		RunE: func(c *cobra.Command, _ []string) error { return noCommand(c) },
	}
	c.AddCommand(newCtlListCommand(s), newCtlGetCommand(s))
	return c
}

type ctlList struct {
	streams
	engineConn
	all bool // --all-namespaces
}

func newCtlListCommand(s streams) *cobra.Command {
	o := &ctlList{streams: s, engineConn: engineConn{kube: genericclioptions.NewConfigFlags(true)}}
	c := &cobra.Command{
		Use:   "list [-n NAMESPACE | -A]",
		Short: "List the controllers you may see",
		Long: `List the cluster-scoped controllers you may get, and the namespaced controllers
of one namespace (--namespace, default the kubeconfig's) or, with -A, of every
namespace where you may list them.`,
		Example: `  metalambda ctl list -n team-a
  metalambda ctl list -A`,
		Args: exactArgs(),
		RunE: func(c *cobra.Command, _ []string) error { return o.run(c) },
	}
	o.kube.AddFlags(c.Flags())
	c.Flags().StringVar(&o.engine, "engine", "", "the engine API's URL (default $"+engineEnv+", else the local platform's engine)")
	c.Flags().BoolVarP(&o.all, "all-namespaces", "A", false, "list the namespaced controllers of every namespace where you may list them")
	return c
}

func (o *ctlList) run(cmd *cobra.Command) error {
	namespace := ""
	if !o.all {
		var err error
		if namespace, err = o.namespace(); err != nil {
			return err
		}
	} else if o.kube.Namespace != nil && *o.kube.Namespace != "" {
		return usageError{errors.New("--all-namespaces and --namespace cannot be used together")}
	}
	client, base, err := o.client()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	list, err := client.Controllers(ctx, "")
	if err != nil {
		return explainEngine(err, base)
	}
	var shown []engineapi.ControllerSummary
	for _, c := range list.Items {
		if namespace == "" || c.Namespace == "" || c.Namespace == namespace {
			shown = append(shown, c)
		}
	}
	printControllers(o.out, shown, namespace)
	return nil
}

// printControllers is the table of ctl list.
func printControllers(out io.Writer, items []engineapi.ControllerSummary, namespace string) {
	if len(items) == 0 {
		if namespace != "" {
			fmt.Fprintf(out, "no controllers you may see in namespace %s or cluster-wide\n", namespace)
		} else {
			fmt.Fprintln(out, "no controllers you may see")
		}
		return
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "KIND\tNAMESPACE\tNAME\tREADY\tPARENTS\tERRORS/H\tSERVICE ACCOUNT")
	for _, c := range items {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%d\t%s\n", c.Kind, orDash(c.Namespace), c.Name, readyColumn(c), c.Parents, c.SyncErrorsLastHour, orDash(c.ServiceAccountName))
	}
	_ = w.Flush()
}

// readyColumn is True while the controller runs, else the reason of its Ready
// condition (MissingRights, InvalidSpec...) or False.
func readyColumn(c engineapi.ControllerSummary) string {
	if c.Running {
		return "True"
	}
	for _, cond := range c.Conditions {
		if cond.Type == "Ready" && cond.Reason != "" {
			return "False (" + cond.Reason + ")"
		}
	}
	return "False"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

type ctlGet struct {
	streams
	engineConn
}

func newCtlGetCommand(s streams) *cobra.Command {
	o := &ctlGet{streams: s, engineConn: engineConn{kube: genericclioptions.NewConfigFlags(true)}}
	c := &cobra.Command{
		Use:   "get KIND/NAME [-n NAMESPACE]",
		Short: "Show one controller: spec summary, service account, conditions, parents, recent hook calls",
		Long: `Show one controller as the engine runs it: its parent and child resources and
hooks, the ServiceAccount a namespaced controller acts as, its conditions (a
namespaced controller whose ServiceAccount lacks a grant is Ready=False
MissingRights, naming it), how many parents it has and its recent hook calls.

KIND is compositecontroller (cc), decoratorcontroller (dec),
namespacedcompositecontroller (ncc) or namespaceddecoratorcontroller (ndc); a
namespaced controller is in --namespace (default the kubeconfig's namespace).`,
		Example: `  metalambda ctl get ncc/greeter -n team-a
  metalambda ctl get cc/web`,
		Args: exactArgs("KIND/NAME"),
		RunE: func(c *cobra.Command, args []string) error { return o.run(c, args[0]) },
	}
	o.kube.AddFlags(c.Flags())
	c.Flags().StringVar(&o.engine, "engine", "", "the engine API's URL (default $"+engineEnv+", else the local platform's engine)")
	return c
}

func (o *ctlGet) run(cmd *cobra.Command, arg string) error {
	if !strings.Contains(arg, "/") {
		return usageError{fmt.Errorf("name the controller as KIND/NAME, e.g. ncc/%s", arg)}
	}
	ref, err := o.controllerRef(arg)
	if err != nil {
		return err
	}
	client, base, err := o.client()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sum, err := client.Controller(ctx, "", ref)
	if err != nil {
		return explainEngine(err, base)
	}
	var calls *engineapi.HookCallList
	if sum.Running {
		if calls, err = client.HookCalls(ctx, "", engineapi.HookCallQuery{Controller: ref.String(), Limit: recentCalls}); err != nil {
			return explainEngine(err, base)
		}
	}
	printController(o.out, sum, calls)
	return nil
}

// printController is the page of ctl get.
func printController(out io.Writer, c *engineapi.ControllerSummary, calls *engineapi.HookCallList) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "Kind:\t%s\n", c.Kind)
	if c.Namespace != "" {
		fmt.Fprintf(w, "Namespace:\t%s\n", c.Namespace)
	}
	fmt.Fprintf(w, "Name:\t%s\n", c.Name)
	if c.ServiceAccountName != "" {
		fmt.Fprintf(w, "Service account:\t%s\n", c.ServiceAccountName)
	}
	fmt.Fprintf(w, "Running:\t%v\n", c.Running)
	if c.Error != "" {
		fmt.Fprintf(w, "Error:\t%s\n", c.Error)
	}
	fmt.Fprintf(w, "Parent resources:\t%s\n", resources(c.ParentResources))
	fmt.Fprintf(w, "Child resources:\t%s\n", resources(c.ChildResources))
	hooks := make([]string, 0, len(c.Hooks))
	for name, url := range c.Hooks {
		hooks = append(hooks, name+" "+url)
	}
	sort.Strings(hooks)
	fmt.Fprintf(w, "Hooks:\t%s\n", orDash(strings.Join(hooks, ", ")))
	fmt.Fprintf(w, "Parents:\t%d\n", c.Parents)
	fmt.Fprintf(w, "Failed hook calls (last hour):\t%d\n", c.SyncErrorsLastHour)
	_ = w.Flush()
	fmt.Fprintln(out, "Conditions:")
	if len(c.Conditions) == 0 {
		fmt.Fprintln(out, "  none")
	}
	for _, cond := range c.Conditions {
		line := "  " + cond.Type + "=" + cond.Status
		if cond.Reason != "" {
			line += " " + cond.Reason
		}
		if cond.Message != "" {
			line += ": " + cond.Message
		}
		fmt.Fprintln(out, line)
	}
	if calls == nil {
		return
	}
	fmt.Fprintln(out, "Recent hook calls:")
	if len(calls.Items) == 0 {
		if calls.HistoryEnabled {
			fmt.Fprintln(out, "  none you may see")
		} else {
			fmt.Fprintln(out, "  the engine records none (--hook-call-history=0)")
		}
		return
	}
	w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "  TIME\tHOOK\tPARENT\tSTATUS\tDURATION")
	for _, call := range calls.Items {
		parent := call.Parent.Name
		if call.Parent.Namespace != "" {
			parent = call.Parent.Namespace + "/" + parent
		}
		status := fmt.Sprint(call.Status)
		if call.Error != "" {
			status = "error: " + call.Error
		}
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%.1fms\n", call.Time.Format(time.RFC3339), call.Hook, parent, status, call.DurationMS)
	}
	_ = w.Flush()
}

func resources(rs []engineapi.Resource) string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Resource + " (" + r.APIVersion + ")"
	}
	return orDash(strings.Join(out, ", "))
}

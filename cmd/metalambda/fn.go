package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/metalambda/metalambda/internal/httpapi"
)

// fnCommand holds what every fn verb shares: the standard files and how to reach the
// gateway.
type fnCommand struct {
	streams
	connect connectOptions
}

func newFnCommand(s streams) *cobra.Command {
	f := &fnCommand{streams: s, connect: connectOptions{kube: genericclioptions.NewConfigFlags(true)}}
	c := &cobra.Command{
		Use:     "fn",
		Aliases: []string{"function", "functions"},
		Short:   "Manage and call the gateway's hook functions",
		Long: `Manage and call the gateway's hook functions (Function objects, metalambda.dev/v1alpha1).

Every verb talks to the gateway's /v1 API, found in this order: --gateway, then
$` + gatewayEnv + `, then the gateway of the local platform when the kubeconfig is the one
` + "`metalambda up`" + ` wrote. The namespace and the credentials come from the kubeconfig, as
for kubectl (--kubeconfig, --context, --namespace, --token); the gateway takes bearer
tokens only, and RBAC on functions.metalambda.dev decides what each user may do.

` + exitCodesHelp,
		Args: unknownCommand,
		RunE: func(c *cobra.Command, _ []string) error { return noCommand(c) },
	}
	f.connect.kube.AddFlags(c.PersistentFlags())
	c.PersistentFlags().StringVar(&f.connect.gateway, "gateway", "", "the gateway's URL (default $"+gatewayEnv+", else the local platform's gateway)")
	c.AddCommand(f.applyCommand(), f.listCommand(), f.getCommand(), f.deleteCommand(),
		f.invokeCommand(), f.logsCommand(), f.initCommand(), f.historyCommand(), f.rollbackCommand(), f.rolloutCommand())
	return c
}

// run builds the gateway client and runs fn with the command's context, which also
// ends on Ctrl-C.
func (f *fnCommand) run(cmd *cobra.Command, fn func(context.Context, *gatewayClient) error) error {
	client, err := f.connect.client()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return explain(fn(ctx, client), client)
}

// explain adds what the user can do to the gateway's refusals.
func explain(err error, c *gatewayClient) error {
	var api *httpapi.Error
	if !errors.As(err, &api) {
		return err
	}
	switch api.Status {
	case http.StatusUnauthorized:
		return fmt.Errorf("the gateway at %s refused the credentials: %w (the kubeconfig's token, or --token, must be one the cluster's API server accepts)", c.base, err)
	case http.StatusForbidden:
		return fmt.Errorf("%w (RBAC on functions.metalambda.dev decides; see the Roles in deploy/gateway/rbac.yaml)", err)
	}
	return err
}

// completeNames completes a function name from the gateway's list.
func (f *fnCommand) completeNames(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	client, err := f.connect.client()
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	items, err := client.list(context.Background())
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	names := make([]string, 0, len(items))
	for _, item := range items {
		names = append(names, item.GetName())
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}

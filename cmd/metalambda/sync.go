package main

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/metalambda/metalambda/internal/engineapi"
	"github.com/metalambda/metalambda/internal/local/platform"
)

// engineEnv names the engine's API when --engine does not.
const engineEnv = "METALAMBDA_ENGINE"

// syncCommand is `metalambda sync`: a sync on demand through the engine's API.
type syncCommand struct {
	streams
	engineConn
	all  bool   // --all
	kind string // --parent-kind
}

// engineConn is how a command reaches the engine's API: the kubeconfig flags, whose
// bearer token it presents, and --engine.
type engineConn struct {
	kube   *genericclioptions.ConfigFlags
	engine string // --engine
}

func newSyncCommand(s streams) *cobra.Command {
	o := &syncCommand{streams: s, engineConn: engineConn{kube: genericclioptions.NewConfigFlags(true)}}
	c := &cobra.Command{
		Use:   "sync CONTROLLER [NAMESPACE/PARENT | PARENT | --all]",
		Short: "Sync a controller's parent now, or all of them, without changing them",
		Long: `Sync one parent of a controller now, or every parent with --all: the engine calls
the controller's sync hook for it at once, ahead of resyncs, without any change to
the parent.

CONTROLLER is NAME (a CompositeController) or KIND/NAME, KIND being
compositecontroller (cc), decoratorcontroller (dec), namespacedcompositecontroller
(ncc) or namespaceddecoratorcontroller (ndc). A parent is NAMESPACE/NAME, or NAME
with --namespace, or NAME alone for a cluster-scoped parent. A namespaced
controller is in --namespace (default: the kubeconfig's namespace), and its parents
are in its namespace: name them by NAME. --parent-kind picks among a decorator's
parent kinds.

The engine's API is found in this order: --engine, then $` + engineEnv + `, then the
engine of the local platform when the kubeconfig is the one ` + "`metalambda up`" + ` wrote.
The credentials are the kubeconfig's bearer token, as for kubectl (--kubeconfig,
--context, --token). The user needs get on the controller and update on the parent;
--all syncs the parents in the namespaces where the user may update their resource
(cluster-wide for cluster-scoped parents), and leaves the others out.

` + exitCodesHelp,
		Example: `  metalambda sync web default/hello            # CompositeController web, parent hello in default
  metalambda sync web hello -n default
  metalambda sync dec/add-labels --all          # every parent of DecoratorController add-labels
  metalambda sync ncc/greeter hello -n team-a   # NamespacedCompositeController greeter of team-a`,
		Args: func(c *cobra.Command, args []string) error {
			switch {
			case len(args) == 0:
				return usageError{errors.New("name a controller: metalambda sync CONTROLLER [NAMESPACE/PARENT | --all]")}
			case len(args) > 2:
				return usageError{fmt.Errorf("sync takes a controller and at most one parent, got %d arguments", len(args))}
			case o.all == (len(args) == 2):
				return usageError{errors.New("name one parent (NAMESPACE/PARENT, or PARENT for a cluster-scoped one), or pass --all, not both")}
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error { return o.run(c, args) },
	}
	o.kube.AddFlags(c.Flags())
	c.Flags().StringVar(&o.engine, "engine", "", "the engine API's URL (default $"+engineEnv+", else the local platform's engine)")
	c.Flags().BoolVar(&o.all, "all", false, "sync every parent of the controller that you may update")
	c.Flags().StringVar(&o.kind, "parent-kind", "", "the parent's kind, when a DecoratorController has parents of several kinds with that name")
	return c
}

func (o *syncCommand) run(cmd *cobra.Command, args []string) error {
	ref, err := o.controllerRef(args[0])
	if err != nil {
		return err
	}
	req := engineapi.SyncRequest{All: o.all, Kind: o.kind}
	if !o.all {
		req.Namespace, req.Name = o.parent(args[1])
		if ref.Namespace != "" && req.Namespace != ref.Namespace && strings.Contains(args[1], "/") {
			return usageError{fmt.Errorf("the parents of %s are in its namespace %s, not %s", ref, ref.Namespace, req.Namespace)}
		}
	}
	client, base, err := o.client()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := client.SyncController(ctx, "", ref, req)
	if err != nil {
		return explainEngine(err, base)
	}
	printSync(o.out, res)
	return nil
}

// parseController reads NAME or KIND/NAME.
func parseController(arg string) (kind, name string, err error) {
	kind, name, ok := strings.Cut(arg, "/")
	if !ok {
		return engineapi.KindComposite, arg, nil
	}
	if k := controllerKind(kind); k != "" && name != "" {
		return k, name, nil
	}
	return "", "", usageError{fmt.Errorf("controller %q: KIND must be compositecontroller (cc), decoratorcontroller (dec), namespacedcompositecontroller (ncc) or namespaceddecoratorcontroller (ndc)", arg)}
}

// controllerKind reads a controller kind, its plural or short name; "" for none.
func controllerKind(s string) string {
	switch strings.ToLower(s) {
	case "compositecontroller", "compositecontrollers", "cc":
		return engineapi.KindComposite
	case "decoratorcontroller", "decoratorcontrollers", "dec":
		return engineapi.KindDecorator
	case "namespacedcompositecontroller", "namespacedcompositecontrollers", "ncc":
		return engineapi.KindNamespacedComposite
	case "namespaceddecoratorcontroller", "namespaceddecoratorcontrollers", "ndc":
		return engineapi.KindNamespacedDecorator
	}
	return ""
}

// controllerRef reads NAME or KIND/NAME; a namespaced controller is in --namespace,
// else the kubeconfig's namespace.
func (o *engineConn) controllerRef(arg string) (engineapi.ControllerRef, error) {
	kind, name, err := parseController(arg)
	if err != nil {
		return engineapi.ControllerRef{}, err
	}
	ref := engineapi.ControllerRef{Kind: kind, Name: name}
	if engineapi.Namespaced(kind) {
		if ref.Namespace, err = o.namespace(); err != nil {
			return ref, err
		}
	}
	return ref, nil
}

// namespace is --namespace, else the kubeconfig's namespace ("default" without one).
func (o *engineConn) namespace() (string, error) {
	if o.kube.Namespace != nil && *o.kube.Namespace != "" {
		return *o.kube.Namespace, nil
	}
	ns, _, err := o.kube.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", fmt.Errorf("the kubeconfig: %w", err)
	}
	return ns, nil
}

// parent reads NAMESPACE/NAME, or NAME in --namespace, or NAME alone (cluster-scoped).
func (o *syncCommand) parent(arg string) (namespace, name string) {
	if ns, name, ok := strings.Cut(arg, "/"); ok {
		return ns, name
	}
	if o.kube.Namespace != nil && *o.kube.Namespace != "" {
		return *o.kube.Namespace, arg
	}
	return "", arg
}

// client is an engine API client that presents the kubeconfig's bearer token, and
// the engine's URL.
func (o *engineConn) client() (*engineapi.Client, string, error) {
	loader := o.kube.ToRawKubeConfigLoader()
	cfg, err := o.kube.ToRESTConfig()
	if err != nil {
		return nil, "", fmt.Errorf("the kubeconfig: %w", err)
	}
	base, source, err := o.findEngine(loader, cfg.Host)
	if err != nil {
		return nil, "", err
	}
	rt, err := bearerTransport(cfg, "the engine's API")
	if err != nil {
		return nil, "", err
	}
	return &engineapi.Client{BaseURL: base, HTTP: &http.Client{Transport: rt, Timeout: cfg.Timeout}}, base + " (" + source + ")", nil
}

// findEngine returns the engine API's URL and where it was found: --engine, then
// $METALAMBDA_ENGINE, then the engine-url file that `metalambda up` writes beside the
// kubeconfig it writes, when the kubeconfig in use is that one.
func (o *engineConn) findEngine(loader clientcmd.ClientConfig, apiHost string) (string, string, error) {
	return findURL(loader, apiHost, o.engine, "--engine", engineEnv, platform.EngineURLFile, "engine API",
		"no engine API: pass --engine URL or set $"+engineEnv+"; only a kubeconfig that `metalambda up` wrote names its engine. "+
			"An engine in a cluster serves its API only with --api-address (the Helm chart's engine.api values), reached with `kubectl port-forward` to its Service")
}

// explainEngine says what to do about the engine API's refusals.
func explainEngine(err error, base string) error {
	var api *engineapi.Error
	var ue *url.Error
	switch {
	case errors.As(err, &api) && api.Status == http.StatusUnauthorized:
		return fmt.Errorf("the engine API at %s refused the credentials: %w (the kubeconfig's token, or --token, must be one the cluster's API server accepts)", base, err)
	case errors.As(err, &api) && api.Status == http.StatusForbidden:
		return fmt.Errorf("%w (a sync needs get on the controller and update on the parent)", err)
	case errors.As(err, &ue):
		return fmt.Errorf("cannot reach the engine API at %s: %w", base, ue.Err)
	}
	return err
}

func printSync(w interface{ Write([]byte) (int, error) }, res *engineapi.SyncResult) {
	plural := "s"
	if res.Queued == 1 {
		plural = ""
	}
	name := res.Controller.Name
	if res.Controller.Namespace != "" {
		name = res.Controller.Namespace + "/" + name
	}
	fmt.Fprintf(w, "queued %d parent%s of %s %s\n", res.Queued, plural, res.Controller.Kind, name)
	for _, p := range res.Parents {
		name := p.Name
		if p.Namespace != "" {
			name = p.Namespace + "/" + name
		}
		if p.HeldUntil != nil {
			name += " (its hook asked to wait: synced at " + p.HeldUntil.Format("15:04:05Z07:00") + ")"
		}
		fmt.Fprintln(w, "  "+name)
	}
	if more := res.Queued - len(res.Parents); more > 0 {
		fmt.Fprintf(w, "  ... and %d more\n", more)
	}
	if res.NotPermitted > 0 {
		fmt.Fprintf(w, "left out %d parent(s) you may not update\n", res.NotPermitted)
	}
}

package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	fnv1 "github.com/metalambda/metalambda/internal/apis/metalambda/v1alpha1"
	"github.com/metalambda/metalambda/internal/gatewayapi"
	"github.com/metalambda/metalambda/internal/jsonvalue"
)

func (f *fnCommand) historyCommand() *cobra.Command {
	pf := genericclioptions.NewPrintFlags("")
	c := &cobra.Command{
		Use:   "history NAME",
		Short: "List a function's revisions",
		Long: `List a function's revisions, newest first: each change of its code, handler, runtime,
timeout, env or network is a revision, kept as an apps/v1 ControllerRevision named
NAME-HASH (kubectl get controllerrevisions -l metalambda.dev/function=NAME). SHARE is
the percentage of parents a live revision serves; CURRENT marks the spec's revision.
The caller needs to be allowed to list controllerrevisions in the namespace.`,
		Example: `  metalambda fn history hello
  metalambda fn history hello -o yaml`,
		Args:              exactArgs("NAME"),
		ValidArgsFunction: f.completeNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			printer, err := toPrinter(pf)
			if err != nil {
				return err
			}
			return f.run(cmd, func(ctx context.Context, c *gatewayClient) error {
				revs, err := c.revisions(ctx, args[0])
				if err != nil {
					return err
				}
				if _, table := printer.(*tablePrinter); table {
					if len(revs) == 0 {
						fmt.Fprintf(f.err, "No revisions of function %s/%s yet.\n", c.namespace, args[0])
						return nil
					}
					return printer.PrintObj(revisionTable(revs), f.out)
				}
				list, err := revisionList(revs)
				if err != nil {
					return err
				}
				return printer.PrintObj(list, f.out)
			})
		},
	}
	pf.AddFlags(c)
	return c
}

// revisionTable lays revisions out for the table printer.
func revisionTable(revs []gatewayapi.Revision) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		{Name: "Revision", Type: "integer"},
		{Name: "Name", Type: "string"},
		{Name: "Created", Type: "string"},
		{Name: "Share", Type: "string"},
		{Name: "Current", Type: "string"},
		{Name: "Runtime", Type: "string"},
		{Name: "Handler", Type: "string"},
		{Name: "Source", Type: "string"},
	}}
	for _, r := range revs {
		share, current := "-", ""
		if r.Share != nil {
			share = strconv.Itoa(int(*r.Share)) + "%"
		}
		if r.Current {
			current = "*"
		}
		handler := r.Spec.Handler
		if handler == "" {
			handler = "<default>"
		}
		sum := sha256.Sum256([]byte(r.Spec.Source))
		t.Rows = append(t.Rows, metav1.TableRow{Cells: []any{r.Revision, r.Name, age(r.Created), share, current, r.Spec.Runtime, handler, "sha256:" + hex.EncodeToString(sum[:])[:12]}})
	}
	return t
}

// revisionList is revisions as a List object, for -o json, yaml and jsonpath.
func revisionList(revs []gatewayapi.Revision) (runtime.Object, error) {
	list := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "v1", "kind": "List", "metadata": map[string]any{}}}
	for _, r := range revs {
		var item map[string]any
		if err := jsonvalue.Convert(r, &item); err != nil {
			return nil, err
		}
		list.Items = append(list.Items, unstructured.Unstructured{Object: item})
	}
	return list, nil
}

type rollbackOptions struct {
	to   int64
	wait time.Duration
}

func (f *fnCommand) rollbackCommand() *cobra.Command {
	var o rollbackOptions
	c := &cobra.Command{
		Use:   "rollback NAME",
		Short: "Put a function back to an earlier revision",
		Long: `Put a function back to an earlier revision: its spec's code, handler, runtime, timeout,
env and network are written back as they were in that revision (an update of the
Function, which kubectl users see too); its history and rollout settings stay. The
gateway then makes that revision the latest, with the next number, and serves it as
any new revision (at once, or by the function's rollout policy). By default the
revision before the current one; --to names another (see metalambda fn history).`,
		Example: `  metalambda fn rollback hello
  metalambda fn rollback hello --to 3`,
		Args:              exactArgs("NAME"),
		ValidArgsFunction: f.completeNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("to") && o.to < 1 {
				return usageError{fmt.Errorf("--to %d: a revision number is 1 or more (see metalambda fn history %s)", o.to, args[0])}
			}
			return f.run(cmd, func(ctx context.Context, c *gatewayClient) error { return f.rollback(ctx, c, &o, args[0]) })
		},
	}
	c.Flags().Int64Var(&o.to, "to", 0, "the revision number to go back to (default: the one before the current)")
	c.Flags().DurationVar(&o.wait, "wait", time.Minute, "how long to wait until the gateway serves it (0: do not wait)")
	return c
}

func (f *fnCommand) rollback(ctx context.Context, c *gatewayClient, o *rollbackOptions, name string) error {
	revs, err := c.revisions(ctx, name)
	if err != nil {
		return err
	}
	target, err := rollbackTarget(revs, o.to)
	if err != nil {
		return fmt.Errorf("function %s/%s: %w (see metalambda fn history %s)", c.namespace, name, err, name)
	}
	obj, err := c.get(ctx, name)
	if err != nil {
		return err
	}
	var current fnv1.FunctionSpec
	if err := jsonvalue.Convert(obj.Object["spec"], &current); err != nil {
		return fmt.Errorf("function %s/%s: read its spec: %w", c.namespace, name, err)
	}
	body := map[string]any{"metadata": map[string]any{"name": name}, "spec": current.WithRevision(target.Spec)}
	updated, _, err := c.put(ctx, name, body)
	if err != nil {
		return err
	}
	fmt.Fprintf(f.err, "function %s/%s rolled back to revision %d (%s)\n", c.namespace, name, target.Revision, target.Name)
	if o.wait <= 0 {
		return nil
	}
	url, err := waitServed(ctx, c, name, updated.GetGeneration(), o.wait)
	if err != nil {
		return err
	}
	fmt.Fprintln(f.out, url)
	return nil
}

// rollbackTarget is revision to (by number), or, for 0, the newest revision older
// than the current one. revs are newest first.
func rollbackTarget(revs []gatewayapi.Revision, to int64) (gatewayapi.Revision, error) {
	if len(revs) == 0 {
		return gatewayapi.Revision{}, errors.New("no revisions recorded yet")
	}
	if to > 0 {
		for _, r := range revs {
			if r.Revision == to {
				return r, nil
			}
		}
		return gatewayapi.Revision{}, fmt.Errorf("no revision %d: the revisions kept are %s", to, numbers(revs))
	}
	current := revs[0].Revision
	for _, r := range revs {
		if r.Current {
			current = r.Revision
		}
	}
	for _, r := range revs {
		if r.Revision < current {
			return r, nil
		}
	}
	return gatewayapi.Revision{}, fmt.Errorf("no revision before the current one (%d)", current)
}

func numbers(revs []gatewayapi.Revision) string {
	out := ""
	for i := len(revs) - 1; i >= 0; i-- {
		if out != "" {
			out += ", "
		}
		out += strconv.FormatInt(revs[i].Revision, 10)
	}
	return out
}

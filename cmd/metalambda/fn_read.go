package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
)

func (f *fnCommand) listCommand() *cobra.Command {
	pf := genericclioptions.NewPrintFlags("")
	c := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the functions of the namespace",
		Example: `  metalambda fn list
  metalambda fn list -n team-a -o wide
  metalambda fn list -o jsonpath='{.items[*].status.url}'`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			printer, err := toPrinter(pf)
			if err != nil {
				return err
			}
			return f.run(cmd, func(ctx context.Context, c *gatewayClient) error {
				items, err := c.list(ctx)
				if err != nil {
					return err
				}
				if _, table := printer.(*tablePrinter); table {
					if len(items) == 0 {
						fmt.Fprintf(f.err, "No functions in namespace %s.\n", c.namespace)
						return nil
					}
					return printer.PrintObj(functionTable(items...), f.out)
				}
				list := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "v1", "kind": "List", "metadata": map[string]any{}}, Items: items}
				return printer.PrintObj(list, f.out)
			})
		},
	}
	pf.AddFlags(c)
	return c
}

func (f *fnCommand) getCommand() *cobra.Command {
	pf := genericclioptions.NewPrintFlags("")
	c := &cobra.Command{
		Use:   "get NAME",
		Short: "Show one function",
		Example: `  metalambda fn get hello
  metalambda fn get hello -o yaml
  metalambda fn get hello -o jsonpath='{.status.url}'`,
		Args:              exactArgs("NAME"),
		ValidArgsFunction: f.completeNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			printer, err := toPrinter(pf)
			if err != nil {
				return err
			}
			return f.run(cmd, func(ctx context.Context, c *gatewayClient) error {
				obj, err := c.get(ctx, args[0])
				if err != nil {
					return err
				}
				if _, table := printer.(*tablePrinter); table {
					return printer.PrintObj(functionTable(*obj), f.out)
				}
				return printer.PrintObj(obj, f.out)
			})
		},
	}
	pf.AddFlags(c)
	return c
}

func (f *fnCommand) deleteCommand() *cobra.Command {
	return &cobra.Command{
		Use:               "delete NAME",
		Aliases:           []string{"rm"},
		Short:             "Delete a function",
		Example:           `  metalambda fn delete hello`,
		Args:              exactArgs("NAME"),
		ValidArgsFunction: f.completeNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, func(ctx context.Context, c *gatewayClient) error {
				if err := c.delete(ctx, args[0]); err != nil {
					return err
				}
				fmt.Fprintf(f.out, "function %s/%s deleted\n", c.namespace, args[0])
				return nil
			})
		},
	}
}

// tablePrinter is cli-runtime's table printer, told apart from the -o printers.
type tablePrinter struct{ printers.ResourcePrinter }

// toPrinter is the printer -o asks for: the table by default and for -o wide
// (which adds the Ready condition's reason), else json, yaml, name, jsonpath or
// go-template.
func toPrinter(pf *genericclioptions.PrintFlags) (printers.ResourcePrinter, error) {
	switch *pf.OutputFormat {
	case "":
		return &tablePrinter{printers.NewTablePrinter(printers.PrintOptions{})}, nil
	case "wide":
		return &tablePrinter{printers.NewTablePrinter(printers.PrintOptions{Wide: true})}, nil
	}
	p, err := pf.ToPrinter()
	if err != nil {
		return nil, usageError{err}
	}
	return p, nil
}

// functionTable lays functions out in the columns of the Function CRD's
// additionalPrinterColumns, so kubectl get fn and metalambda fn list agree.
func functionTable(items ...unstructured.Unstructured) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string"},
		{Name: "Runtime", Type: "string"},
		{Name: "Ready", Type: "string"},
		{Name: "Reason", Type: "string", Priority: 1},
		{Name: "URL", Type: "string"},
		{Name: "Age", Type: "string"},
	}}
	for i := range items {
		u := &items[i]
		rt, _, _ := unstructured.NestedString(u.Object, "spec", "runtime")
		url, _, _ := unstructured.NestedString(u.Object, "status", "url")
		ready, reason := readyCondition(u)
		t.Rows = append(t.Rows, metav1.TableRow{
			Cells:  []any{u.GetName(), rt, ready, reason, url, age(u.GetCreationTimestamp().Time)},
			Object: runtime.RawExtension{Object: u},
		})
	}
	return t
}

// readyCondition returns the status and reason of the Ready condition, when the
// gateway has written it for the current generation.
func readyCondition(u *unstructured.Unstructured) (status, reason string) {
	conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conditions {
		m, _ := c.(map[string]any)
		if m["type"] != "Ready" {
			continue
		}
		status, _ = m["status"].(string)
		reason, _ = m["reason"].(string)
	}
	return status, reason
}

func age(t time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(time.Since(t))
}

// printJSONLine writes data and a newline.
func printJSONLine(w io.Writer, data []byte) {
	_, _ = w.Write(data)
	_, _ = io.WriteString(w, "\n")
}

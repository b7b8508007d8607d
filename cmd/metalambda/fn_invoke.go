package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/metalambda/metalambda/internal/gatewayapi"
	"github.com/metalambda/metalambda/internal/httpapi"
)

func (f *fnCommand) invokeCommand() *cobra.Command {
	var data string
	c := &cobra.Command{
		Use:   "invoke NAME -d REQUEST",
		Short: "Call a function with a hook request; print its response and logs",
		Long: `Call a function with a hook request, as a test call through the gateway's API (the
verb invoke on functions.metalambda.dev). The response goes to stdout as JSON, the
function's logs to stderr, so the output pipes into jq. A function that fails prints
its error and logs on stderr and exits with 3.`,
		Example: `  metalambda fn invoke hello -d @sample-request.json
  metalambda fn invoke hello -d '{"parent": {"metadata": {"name": "p"}}, "children": {}}'
  kubectl get mykind p -o json | jq '{parent: ., children: {}}' | metalambda fn invoke hello -d @-
  metalambda fn invoke hello -d @sample-request.json 2>/dev/null | jq .children`,
		Args:              exactArgs("NAME"),
		ValidArgsFunction: f.completeNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			body, err := requestBody(data, f.in)
			if err != nil {
				return err
			}
			return f.run(cmd, func(ctx context.Context, c *gatewayClient) error { return f.invoke(ctx, c, args[0], body) })
		},
	}
	c.Flags().StringVarP(&data, "data", "d", "", "the request: JSON, @FILE, or @- for stdin")
	_ = c.MarkFlagRequired("data")
	return c
}

// requestBody reads -d: JSON as it is, @FILE, or @- for stdin; it must be JSON.
func requestBody(data string, stdin io.Reader) ([]byte, error) {
	var body []byte
	var err error
	switch {
	case data == "@-":
		body, err = io.ReadAll(stdin)
	case strings.HasPrefix(data, "@"):
		body, err = os.ReadFile(data[1:])
	default:
		body = []byte(data)
	}
	if err != nil {
		return nil, fmt.Errorf("read the request: %w", err)
	}
	if !json.Valid(body) {
		return nil, usageError{fmt.Errorf("-d %s: the request is not JSON", abbreviate(data))}
	}
	return body, nil
}

func abbreviate(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

func (f *fnCommand) invoke(ctx context.Context, c *gatewayClient, name string, body []byte) error {
	res, err := c.invoke(ctx, name, body)
	var api *httpapi.Error
	if errors.As(err, &api) && api.Code == "function_failed" {
		writeLogs(f.err, api.Logs)
		fmt.Fprintf(f.err, "metalambda: function %s/%s failed: %s\n", c.namespace, name, api.Message)
		return &exitStatus{code: exitFunctionFailed}
	}
	if err != nil {
		return err
	}
	writeLogs(f.err, res.Logs)
	var out bytes.Buffer
	if json.Indent(&out, res.Response, "", "  ") != nil {
		out.Reset()
		out.Write(res.Response)
	}
	printJSONLine(f.out, out.Bytes())
	return nil
}

// writeLogs writes a function's logs, ending with a newline.
func writeLogs(w io.Writer, logs string) {
	if logs == "" {
		return
	}
	fmt.Fprint(w, logs)
	if !strings.HasSuffix(logs, "\n") {
		fmt.Fprintln(w)
	}
}

func (f *fnCommand) logsCommand() *cobra.Command {
	var follow bool
	var interval time.Duration
	c := &cobra.Command{
		Use:   "logs NAME",
		Short: "Show a function's recent calls (time, duration, status, logs)",
		Long: `Show a function's recent calls from the gateway's invocation history, oldest first:
time, where the call came from (hook or invoke), HTTP status, duration, then the
function's logs and error indented. The gateway keeps the last 50 calls per function
in memory (the verb invoke on functions.metalambda.dev reads them). With -f, new calls
are printed as they come until Ctrl-C.`,
		Example: `  metalambda fn logs hello
  metalambda fn logs hello -f`,
		Args:              exactArgs("NAME"),
		ValidArgsFunction: f.completeNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, func(ctx context.Context, c *gatewayClient) error { return f.logs(ctx, c, args[0], follow, interval) })
		},
	}
	c.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new calls until Ctrl-C")
	c.Flags().DurationVar(&interval, "interval", time.Second, "how often -f asks the gateway for new calls")
	return c
}

func (f *fnCommand) logs(ctx context.Context, c *gatewayClient, name string, follow bool, interval time.Duration) error {
	var last time.Time
	for first := true; ; first = false {
		items, enabled, err := c.invocations(ctx, name)
		if err != nil {
			if ctx.Err() != nil && !first {
				return nil // Ctrl-C ends -f
			}
			return err
		}
		if first && !enabled {
			fmt.Fprintf(f.err, "function %s/%s keeps no history (spec.history.enabled is false)\n", c.namespace, name)
		}
		last = printInvocations(f.out, items, last)
		if !follow {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
	}
}

// printInvocations prints the calls after the time since, oldest first, and returns
// the time of the newest one printed.
func printInvocations(w io.Writer, newestFirst []gatewayapi.Invocation, since time.Time) time.Time {
	for i := len(newestFirst) - 1; i >= 0; i-- {
		inv := newestFirst[i]
		if !inv.Time.After(since) {
			continue
		}
		fmt.Fprintf(w, "%s  %-6s  %d  %s\n", inv.Time.UTC().Format("2006-01-02T15:04:05.000Z"), inv.Source, inv.Status, formatMS(inv.DurationMS))
		writeIndented(w, inv.Logs)
		if inv.Error != "" {
			writeIndented(w, "error: "+inv.Error)
		}
		since = inv.Time
	}
	return since
}

func formatMS(ms float64) string {
	return (time.Duration(ms * float64(time.Millisecond))).Round(10 * time.Microsecond).String()
}

func writeIndented(w io.Writer, text string) {
	for line := range strings.Lines(text) {
		fmt.Fprint(w, "    "+line)
		if !strings.HasSuffix(line, "\n") {
			fmt.Fprintln(w)
		}
	}
}

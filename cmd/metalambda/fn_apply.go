package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	fnv1 "github.com/metalambda/metalambda/internal/apis/metalambda/v1alpha1"
	"github.com/metalambda/metalambda/internal/gatewayapi"
	"github.com/metalambda/metalambda/internal/httpapi"
)

// runtimes maps a source file's extension to its runtime.
var runtimes = map[string]string{
	".js":        "javascript",
	".mjs":       "javascript",
	".py":        "python",
	".jsonnet":   "jsonnet",
	".libsonnet": "jsonnet",
}

// applyOptions are fn apply's flags.
type applyOptions struct {
	file, name, runtime, handler string
	timeout                      time.Duration
	env, envFrom, envValueFrom   []string
	wait                         time.Duration
}

func (f *fnCommand) applyCommand() *cobra.Command {
	var o applyOptions
	c := &cobra.Command{
		Use:   "apply -f FILE",
		Short: "Create or update a function from a source file and print its hook URL",
		Long: `Create or update a function from a source file and print its hook URL.

The runtime comes from the file's extension (.js javascript, .py python, .jsonnet
jsonnet) unless --runtime names it; the name is the file's name without its extension
unless --name gives it. The gateway compiles the source before anything is stored: a
compile error is printed as FILE:LINE:COLUMN: MESSAGE, as editors and compilers print
them, and nothing changes. --env-from and --env-value-from name Secrets and ConfigMaps
of the namespace that the gateway reads at call time, as a Pod's envFrom and
valueFrom do. Apply replaces what the function runs: a flag left out (--env, say) is
dropped from the function; the settings apply has no flag for (spec.history,
spec.rollout, spec.revisionHistoryLimit) are kept. Each change is a new revision
(metalambda fn history). Apply then waits until the gateway serves the new
version and prints the hook URL alone on stdout.`,
		Example: `  metalambda fn apply -f hook.py
  metalambda fn apply -f hook.js --name greeter --timeout 30s --env GREETING=hello
  metalambda fn apply -f hook.py --env-from secret/db --env-value-from REGION=configmap/settings/region
  URL=$(metalambda fn apply -f hook.jsonnet -n team-a)
  cat hook.py | metalambda fn apply -f - --name hook --runtime python`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			spec, name, err := o.spec(f.in)
			if err != nil {
				return err
			}
			return f.run(cmd, func(ctx context.Context, c *gatewayClient) error { return f.apply(ctx, c, &o, name, spec) })
		},
	}
	c.Flags().StringVarP(&o.file, "filename", "f", "", "the source file (- for stdin)")
	c.Flags().StringVar(&o.name, "name", "", "the function's name (default: the file's name without its extension)")
	c.Flags().StringVar(&o.runtime, "runtime", "", "javascript, python or jsonnet (default: from the file's extension)")
	c.Flags().StringVar(&o.handler, "handler", "", "the function to call (default sync; javascript and python)")
	c.Flags().DurationVar(&o.timeout, "timeout", 0, "how long one call may run, 1s to 300s (default 10s)")
	c.Flags().StringArrayVar(&o.env, "env", nil, "an environment variable KEY=VALUE for the function (repeat for more)")
	c.Flags().StringArrayVar(&o.envFrom, "env-from", nil, "secret/NAME or configmap/NAME: every key becomes a variable (repeat for more; a later one wins)")
	c.Flags().StringArrayVar(&o.envValueFrom, "env-value-from", nil, "VAR=secret/NAME/KEY or VAR=configmap/NAME/KEY: one key as one variable (repeat for more)")
	c.Flags().DurationVar(&o.wait, "wait", time.Minute, "how long to wait until the gateway serves the new version (0: do not wait)")
	_ = c.MarkFlagRequired("filename")
	_ = c.RegisterFlagCompletionFunc("runtime", cobra.FixedCompletions([]string{"javascript", "python", "jsonnet"}, cobra.ShellCompDirectiveNoFileComp))
	_ = c.MarkFlagFilename("filename", "js", "mjs", "py", "jsonnet", "libsonnet")
	return c
}

// spec reads the source and checks the flags, before any network call.
func (o *applyOptions) spec(stdin io.Reader) (gatewayapi.FunctionSpec, string, error) {
	var spec gatewayapi.FunctionSpec
	name, rt := o.name, o.runtime
	ext := strings.ToLower(filepath.Ext(o.file))
	if name == "" && o.file != "-" {
		name = strings.TrimSuffix(filepath.Base(o.file), filepath.Ext(o.file))
	}
	if rt == "" {
		rt = runtimes[ext]
	}
	switch {
	case name == "":
		return spec, "", usageError{errors.New("--name is required when the source comes from stdin")}
	case rt == "" && o.file == "-":
		return spec, "", usageError{errors.New("--runtime is required when the source comes from stdin")}
	case rt == "":
		return spec, "", usageError{fmt.Errorf("cannot tell the runtime of %s from its extension: pass --runtime javascript, python or jsonnet", o.file)}
	}
	if o.timeout != 0 && (o.timeout%time.Second != 0 || o.timeout < time.Second || o.timeout > 300*time.Second) {
		return spec, "", usageError{fmt.Errorf("--timeout %s: want whole seconds from 1s to 300s", o.timeout)}
	}
	env, err := parseEnv(o.env)
	if err != nil {
		return spec, "", err
	}
	envFrom, envValueFrom, err := parseEnvSources(o.envFrom, o.envValueFrom)
	if err != nil {
		return spec, "", err
	}
	source, err := readSource(o.file, stdin)
	if err != nil {
		return spec, "", err
	}
	return gatewayapi.FunctionSpec{
		Runtime: rt, Source: source, Handler: o.handler, TimeoutSeconds: int(o.timeout / time.Second),
		Env: env, EnvFrom: envFrom, EnvValueFrom: envValueFrom,
	}, name, nil
}

// parseEnvSources reads --env-from (KIND/NAME) and --env-value-from
// (VAR=KIND/NAME/KEY), KIND being secret or configmap. The gateway validates names
// and keys; this only checks the shape, so a typo fails before any network call.
func parseEnvSources(from, valueFrom []string) ([]fnv1.EnvFromSource, map[string]fnv1.EnvVarSource, error) {
	var sources []fnv1.EnvFromSource
	for _, s := range from {
		kind, name, ok := strings.Cut(s, "/")
		if !ok || name == "" || strings.Contains(name, "/") {
			return nil, nil, usageError{fmt.Errorf("--env-from %q: want secret/NAME or configmap/NAME", s)}
		}
		ref := &fnv1.EnvSourceRef{Name: name}
		switch kind {
		case "secret":
			sources = append(sources, fnv1.EnvFromSource{SecretRef: ref})
		case "configmap", "cm":
			sources = append(sources, fnv1.EnvFromSource{ConfigMapRef: ref})
		default:
			return nil, nil, usageError{fmt.Errorf("--env-from %q: want secret/NAME or configmap/NAME", s)}
		}
	}
	var vars map[string]fnv1.EnvVarSource
	for _, s := range valueFrom {
		bad := usageError{fmt.Errorf("--env-value-from %q: want VAR=secret/NAME/KEY or VAR=configmap/NAME/KEY", s)}
		variable, ref, ok := strings.Cut(s, "=")
		parts := strings.Split(ref, "/")
		if !ok || variable == "" || len(parts) != 3 || parts[1] == "" || parts[2] == "" {
			return nil, nil, bad
		}
		key := &fnv1.KeyRef{Name: parts[1], Key: parts[2]}
		var src fnv1.EnvVarSource
		switch parts[0] {
		case "secret":
			src.SecretKeyRef = key
		case "configmap", "cm":
			src.ConfigMapKeyRef = key
		default:
			return nil, nil, bad
		}
		if _, dup := vars[variable]; dup {
			return nil, nil, usageError{fmt.Errorf("--env-value-from: %s is named twice", variable)}
		}
		if vars == nil {
			vars = map[string]fnv1.EnvVarSource{}
		}
		vars[variable] = src
	}
	return sources, vars, nil
}

func parseEnv(pairs []string) (map[string]string, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	env := make(map[string]string, len(pairs))
	for _, kv := range pairs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usageError{fmt.Errorf("--env %q: want KEY=VALUE", kv)}
		}
		env[k] = v
	}
	return env, nil
}

func readSource(file string, stdin io.Reader) (string, error) {
	var data []byte
	var err error
	if file == "-" {
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(file)
	}
	if err != nil {
		return "", fmt.Errorf("read the source: %w", err)
	}
	return string(data), nil
}

func (f *fnCommand) apply(ctx context.Context, c *gatewayClient, o *applyOptions, name string, spec gatewayapi.FunctionSpec) error {
	obj, created, err := c.put(ctx, name, spec)
	if err != nil {
		return compileErrorAt(o.file, err)
	}
	verb := "configured"
	if created {
		verb = "created"
	}
	fmt.Fprintf(f.err, "function %s/%s %s\n", c.namespace, name, verb)
	if o.wait <= 0 {
		url, _, _ := unstructured.NestedString(obj.Object, "status", "url")
		if url != "" {
			fmt.Fprintln(f.out, url)
		}
		return nil
	}
	url, err := waitServed(ctx, c, name, obj.GetGeneration(), o.wait)
	if err != nil {
		return err
	}
	fmt.Fprintln(f.out, url)
	return nil
}

// compilePrefix is how the runtimes begin a compile error's message; the position
// comes separately, in the error's line and column.
var compilePrefix = regexp.MustCompile(`^function \S+ does not compile: (line \d+, column \d+: )?`)

// compileErrorAt prints a compile error as FILE:LINE:COLUMN: MESSAGE.
func compileErrorAt(file string, err error) error {
	var api *httpapi.Error
	if !errors.As(err, &api) || api.Code != "compile_error" {
		return err
	}
	if file == "-" {
		file = "<stdin>"
	}
	msg := compilePrefix.ReplaceAllString(api.Message, "")
	if api.Line > 0 {
		return fmt.Errorf("%s:%d:%d: %s", file, api.Line, max(api.Column, 1), msg)
	}
	return fmt.Errorf("%s: %s", file, msg)
}

// waitServed waits until the gateway reports the function's generation loaded, and
// returns its hook URL.
func waitServed(ctx context.Context, c *gatewayClient, name string, generation int64, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		obj, err := c.get(ctx, name)
		if err != nil && ctx.Err() == nil {
			return "", err
		}
		if err == nil {
			if url, done, err := served(obj, generation); done {
				return url, err
			}
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("the gateway did not report function %s/%s served within %s (see `metalambda fn get %s -o yaml`)", c.namespace, name, timeout, name)
		case <-tick.C:
		}
	}
}

// served tells whether the status reports generation (or a later one) loaded, and
// whether it is ready.
func served(obj *unstructured.Unstructured, generation int64) (string, bool, error) {
	observed, _, _ := unstructured.NestedInt64(obj.Object, "status", "observedGeneration")
	if observed < generation {
		return "", false, nil
	}
	url, _, _ := unstructured.NestedString(obj.Object, "status", "url")
	conditions, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conditions {
		m, _ := c.(map[string]any)
		if m["type"] != "Ready" {
			continue
		}
		if m["status"] == "True" {
			return url, true, nil
		}
		return url, true, fmt.Errorf("function %s/%s is not ready: %v: %v", obj.GetNamespace(), obj.GetName(), m["reason"], m["message"])
	}
	return "", false, nil
}

package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/metalambda/metalambda/internal/gateway/starter"
)

func (f *fnCommand) initCommand() *cobra.Command {
	var rt, dir string
	var force bool
	c := &cobra.Command{
		Use:   "init NAME --runtime RUNTIME",
		Short: "Write a starter sync hook and a sample request",
		Long: `Write NAME.py, NAME.js or NAME.jsonnet: a working Metacontroller sync hook that gives
its parent a ConfigMap child and counts the ConfigMaps it has; and
sample-request.json, a sync request it answers. Existing files are kept unless
--force.`,
		Example: `  metalambda fn init hello --runtime python
  metalambda fn apply -f hello.py
  metalambda fn invoke hello -d @sample-request.json`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.init(args[0], rt, dir, force)
		},
	}
	c.Flags().StringVar(&rt, "runtime", "", "javascript, python or jsonnet")
	c.Flags().StringVar(&dir, "dir", ".", "where to write the files")
	c.Flags().BoolVar(&force, "force", false, "overwrite existing files")
	_ = c.MarkFlagRequired("runtime")
	_ = c.RegisterFlagCompletionFunc("runtime", cobra.FixedCompletions([]string{"javascript", "python", "jsonnet"}, cobra.ShellCompDirectiveNoFileComp))
	_ = c.MarkFlagDirname("dir")
	return c
}

func (f *fnCommand) init(name, rt, dir string, force bool) error {
	ext, ok := starter.Extension(rt)
	if !ok {
		return usageError{fmt.Errorf("--runtime %q: want javascript, python or jsonnet", rt)}
	}
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return usageError{fmt.Errorf("function name %q: %s", name, msgs[0])}
	}
	hook := filepath.Join(dir, name+ext)
	sample := filepath.Join(dir, starter.SampleRequestFile)
	source, err := starter.Hook(rt)
	if err != nil {
		return err
	}
	files := []struct {
		data []byte
		to   string
	}{{source, hook}, {starter.SampleRequest(), sample}}
	for _, file := range files {
		if _, err := os.Stat(file.to); err == nil && !force {
			return fmt.Errorf("%s exists: remove it, or pass --force to overwrite it", file.to)
		} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	for _, file := range files {
		if err := os.WriteFile(file.to, file.data, 0o644); err != nil {
			return err
		}
	}
	fmt.Fprintf(f.out, "wrote %s and %s; next:\n  metalambda fn apply -f %s\n  metalambda fn invoke %s -d @%s\n", hook, sample, hook, name, sample)
	return nil
}

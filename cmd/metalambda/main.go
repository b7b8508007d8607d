// Command metalambda is the user's CLI: `metalambda up` runs the whole platform on
// this machine, `metalambda down` stops it, and `metalambda fn` manages the gateway's
// functions (apply, list, get, delete, invoke, logs, init).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/metalambda/metalambda/functions"
	"github.com/metalambda/metalambda/internal/gateway/lambda"
	"github.com/metalambda/metalambda/internal/local/cluster"
	"github.com/metalambda/metalambda/internal/local/node"
	"github.com/metalambda/metalambda/internal/local/platform"
	"github.com/metalambda/metalambda/internal/logging"
)

func main() {
	// A sandbox starts this executable again as its launcher or a script worker.
	lambda.ServeWorker()
	os.Exit(execute(os.Args[1:], streams{in: os.Stdin, out: os.Stdout, err: os.Stderr}))
}

func up(args []string) error {
	fs := flag.NewFlagSet("up", flag.ExitOnError)
	o := platform.Defaults()
	o.Builtins = functions.Builtins()
	fs.StringVar(&o.DataDir, "data-dir", o.DataDir, "where the cluster's state, the kubeconfig and logs live")
	fs.StringVar(&o.IngressAddress, "ingress", o.IngressAddress, "address of the local ingress")
	fs.StringVar(&o.GatewayAddress, "gateway", o.GatewayAddress, "address of the gateway API and hooks")
	// The command keeps the engine's API at the fixed port it always had; the
	// platform's own default is a free port.
	fs.StringVar(&o.EngineAPIAddress, "engine-api", "127.0.0.1:8082", "loopback address of the engine's API of recent hook calls, which the gateway's dashboard reads")
	withNode := fs.Bool("node", os.Geteuid() == 0, "run the local node, so pods run as processes (needs root and the CNI plugins)")
	nodeOpts := node.Defaults()
	fs.StringVar(&nodeOpts.PodCIDR, "pod-cidr", nodeOpts.PodCIDR, "the local node's pod subnet")
	fs.StringVar(&nodeOpts.Bridge, "bridge", nodeOpts.Bridge, "the local node's bridge")
	fs.StringVar(&nodeOpts.ImageMapFile, "image-map", nodeOpts.ImageMapFile, "YAML `file` of image rules for the local node (images: a list of {image, kind, interpreter}), tried before the built-in ones")
	inCluster := fs.Bool("in-cluster", false, "run the engine and the gateway as pods installed from the Helm chart (the node runs bin/engine and bin/gateway for their images), instead of in this process")
	chart := fs.String("chart", "deploy/helm/metalambda", "the Helm chart `directory` --in-cluster installs")
	purge := fs.Bool("purge", false, "start from an empty data directory")
	logOpts := logging.Defaults()
	logOpts.BindFlags(fs)
	_ = fs.Parse(args)
	logConfig, err := logOpts.Config()
	if err != nil {
		return err
	}
	if pid, running := runningPID(o.DataDir); running {
		return fmt.Errorf("a platform already runs from %s (pid %d): `metalambda down` stops it", o.DataDir, pid)
	}
	if *purge {
		if err := os.RemoveAll(o.DataDir); err != nil {
			return err
		}
	}
	bin, err := kubeBinaries()
	if err != nil {
		return err
	}
	o.BinDir = bin
	if *inCluster {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		o.InCluster = &platform.InCluster{ChartDir: *chart, BinDir: filepath.Dir(exe)}
		nodeOpts.Images = append(platform.ComponentImages(o.InCluster.BinDir), nodeOpts.Images...)
	}
	if *withNode {
		// Name what the node lacks (root, a CNI plugin, a tool) before a control
		// plane starts, not after.
		check := nodeOpts
		if check.StateDir, err = filepath.Abs(filepath.Join(o.DataDir, "node")); err != nil {
			return err
		}
		if err := check.Check(); err != nil {
			return fmt.Errorf("the local node cannot run: %w (or start without it: --node=false)", err)
		}
		o.Node = localNode(nodeOpts)
	}
	if err := platform.WritePID(o.DataDir); err != nil {
		return err
	}
	defer os.Remove(platform.PIDFile(o.DataDir))
	if err := redirectLogs(o.DataDir, logConfig); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	p, err := platform.Start(ctx, o, os.Stdout)
	if err != nil {
		return err
	}
	p.Status(os.Stdout)
	<-ctx.Done()
	fmt.Println("metalambda: stopping")
	p.Stop()
	fmt.Println("metalambda: stopped; the data stays in", o.DataDir)
	return nil
}

// localNode builds the local node with its state under the platform's data directory.
func localNode(opts node.Options) func(kubernetes.Interface, string) (platform.NodeRunner, error) {
	return func(kube kubernetes.Interface, dataDir string) (platform.NodeRunner, error) {
		dir, err := filepath.Abs(filepath.Join(dataDir, "node"))
		if err != nil {
			return nil, err
		}
		opts.StateDir = dir
		return node.New(kube, opts)
	}
}

// kubeBinaries finds the pinned control plane: $METALAMBDA_KUBE_BIN, or the build
// script of this checkout, which builds it once (about 10 minutes) and then answers at
// once.
func kubeBinaries() (string, error) {
	if dir := os.Getenv(cluster.BinDirEnv); dir != "" {
		return dir, nil
	}
	script := "deploy/local/build-kube.sh"
	if _, err := os.Stat(script); err != nil {
		return "", fmt.Errorf("no control-plane binaries: set $%s, or run from the repository root so %s can build them", cluster.BinDirEnv, script)
	}
	cmd := exec.Command("bash", script)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("build the control plane: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// redirectLogs sends the platform's own logs to a file, so the terminal shows the
// status table. The records are those of the engine and the gateway run alone
// (package logging), as configured by the same flags.
func redirectLogs(dataDir string, c logging.Config) error {
	f, err := os.OpenFile(dataDir+"/metalambda.log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	c.Install(f)
	return nil
}

func down(args []string) error {
	fs := flag.NewFlagSet("down", flag.ExitOnError)
	dataDir := fs.String("data-dir", ".metalambda", "the data directory of the platform to stop")
	purge := fs.Bool("purge", false, "also delete the data directory")
	_ = fs.Parse(args)
	if pid, running := runningPID(*dataDir); running {
		if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
			return fmt.Errorf("stop pid %d: %w", pid, err)
		}
		deadline := time.Now().Add(2 * time.Minute)
		for syscall.Kill(pid, 0) == nil {
			if time.Now().After(deadline) {
				return fmt.Errorf("pid %d did not stop within 2 minutes", pid)
			}
			time.Sleep(200 * time.Millisecond)
		}
		fmt.Println("metalambda: stopped")
	} else {
		fmt.Println("metalambda: not running")
	}
	if *purge {
		fmt.Println("metalambda: removing", *dataDir)
		return os.RemoveAll(*dataDir)
	}
	return nil
}

// runningPID reads the pid file and reports whether that process is alive.
func runningPID(dataDir string) (int, bool) {
	data, err := os.ReadFile(platform.PIDFile(dataDir))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return 0, false
	}
	err = syscall.Kill(pid, 0)
	return pid, err == nil || errors.Is(err, syscall.EPERM)
}

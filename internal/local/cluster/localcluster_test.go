package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestValidateNamesTheProblem(t *testing.T) {
	bin := t.TempDir()
	for _, name := range []string{"etcd", "kube-apiserver"} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"no bin dir", Options{Host: "127.0.0.1", Components: []Component{}}, "make kube"},
		{"missing binary", Options{BinDir: bin, Host: "127.0.0.1", Components: []Component{Scheduler}, ServiceClusterIPRange: "10.0.0.0/24"}, "kube-scheduler is missing"},
		{"not loopback", Options{BinDir: bin, Host: "10.1.2.3", Components: []Component{}, ServiceClusterIPRange: "10.0.0.0/24"}, "not a loopback address"},
		{"bad range", Options{BinDir: bin, Host: "127.0.0.1", Components: []Component{}, ServiceClusterIPRange: "nope"}, "service cluster IP range"},
		{"valid", Options{BinDir: bin, Host: "127.0.0.1", Components: []Component{}, ServiceClusterIPRange: "10.0.0.0/24", StartTimeout: time.Minute}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.opts.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Validate() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestSecretsAreGeneratedOnceAndReused(t *testing.T) {
	dir := t.TempDir()
	first, err := ensureSecrets(dir)
	if err != nil {
		t.Fatal(err)
	}
	second, err := ensureSecrets(dir)
	if err != nil {
		t.Fatal(err)
	}
	if first.adminToken == "" || first.adminToken != second.adminToken {
		t.Fatalf("admin token changed across restarts: %q then %q", first.adminToken, second.adminToken)
	}
	key, err := os.ReadFile(first.serviceAccountKey)
	if err != nil || !strings.Contains(string(key), "RSA PRIVATE KEY") {
		t.Fatalf("service-account key: %v %.40q", err, key)
	}
	if first.kubeletClient != second.kubeletClient {
		t.Fatalf("kubelet client files moved: %+v then %+v", first.kubeletClient, second.kubeletClient)
	}
	cert, err := tls.LoadX509KeyPair(first.kubeletClient.certFile, first.kubeletClient.keyFile)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(first.kubeletClient.caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("the kubelet client certificate does not verify against its CA: %v", err)
	}
	if leaf.Subject.CommonName != KubeletClientUser {
		t.Errorf("kubelet client certificate names %q", leaf.Subject.CommonName)
	}
	if _, err := ensureSecrets(dir); err != nil {
		t.Fatal(err)
	}
	if again, err := os.ReadFile(first.kubeletClient.caFile); err != nil || string(again) != string(caPEM) {
		t.Error("the client CA changed across restarts")
	}
}

// TestStopEndsTheWholeProcessGroup proves that a component's own children die with it.
func TestStopEndsTheWholeProcessGroup(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "grandchild.pid")
	p, err := startProcess("sh", "/bin/sh", dir, []string{"-c", "sleep 300 & echo $! > " + pidFile + "; wait"})
	if err != nil {
		t.Fatal(err)
	}
	var grandchild int
	deadline := time.Now().Add(10 * time.Second)
	for grandchild == 0 && time.Now().Before(deadline) {
		data, _ := os.ReadFile(pidFile)
		grandchild, _ = strconv.Atoi(strings.TrimSpace(string(data)))
		time.Sleep(10 * time.Millisecond)
	}
	if grandchild == 0 {
		t.Fatal("the shell never started its child")
	}
	if err := p.stop(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if done, _ := p.exited(); !done {
		t.Fatal("process still running after stop")
	}
	// The grandchild is reparented to init, which reaps it; give it a moment.
	for time.Now().Before(deadline) && syscall.Kill(grandchild, 0) == nil {
		time.Sleep(10 * time.Millisecond)
	}
	if err := syscall.Kill(grandchild, 0); err == nil {
		_ = syscall.Kill(grandchild, syscall.SIGKILL)
		t.Fatalf("grandchild %d survived stop", grandchild)
	}
	if !strings.Contains(p.tail(5), "/bin/sh") {
		t.Fatalf("log does not record the command line:\n%s", p.tail(5))
	}
}

func TestStaleTempDirsOfDeadProcessesAreRemoved(t *testing.T) {
	tmp := t.TempDir()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(tmp, tempPrefix+"stale")
	live := filepath.Join(tmp, tempPrefix+"live")
	for dir, pid := range map[string]int{stale: dead.Process.Pid, live: os.Getpid()} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "owner.pid"), []byte(strconv.Itoa(pid)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	removeStaleTempDirs(tmp)
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale dir of dead process %d still exists (%v)", dead.Process.Pid, err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("dir of a live process was removed: %v", err)
	}
}

func TestAddressesNameWhatRuns(t *testing.T) {
	ports := Options{Host: "127.0.0.1", EtcdClientPort: 2379, EtcdPeerPort: 2380, APIServerPort: 6443, ControllerMgrPort: 10257, SchedulerPort: 10259}
	for _, tt := range []struct {
		name       string
		components []Component
		want       []Address
	}{
		{"etcd and kube-apiserver alone", []Component{}, []Address{
			{"127.0.0.1:2379", "etcd's client port"}, {"127.0.0.1:2380", "etcd's peer port"}, {"127.0.0.1:6443", "kube-apiserver"},
		}},
		{"the scheduler too", []Component{Scheduler}, []Address{
			{"127.0.0.1:2379", "etcd's client port"}, {"127.0.0.1:2380", "etcd's peer port"}, {"127.0.0.1:6443", "kube-apiserver"},
			{"127.0.0.1:10259", "kube-scheduler"},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := ports
			o.Components = tt.components
			if diff := cmp.Diff(tt.want, (&Cluster{opts: o}).Addresses()); diff != "" {
				t.Errorf("Addresses (-want +got):\n%s", diff)
			}
		})
	}
}

// TestValidateRefusesOptionsNotFromDefaults: a zero default is an error naming the
// option, not filled in.
func TestValidateRefusesOptionsNotFromDefaults(t *testing.T) {
	bin := t.TempDir()
	for _, name := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for field, change := range map[string]func(*Options){
		"":                      func(*Options) {},
		"Host":                  func(o *Options) { o.Host = "" },
		"ServiceClusterIPRange": func(o *Options) { o.ServiceClusterIPRange = "" },
		"Controllers":           func(o *Options) { o.Controllers = nil },
		"StartTimeout":          func(o *Options) { o.StartTimeout = 0 },
	} {
		o := Defaults()
		o.BinDir = bin
		change(&o)
		err := o.Validate()
		if field == "" && err != nil || field != "" && (err == nil || !strings.Contains(err.Error(), field)) {
			t.Errorf("without %q: Validate() = %v", field, err)
		}
	}
}

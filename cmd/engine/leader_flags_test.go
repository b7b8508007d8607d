package main

import (
	"flag"
	"io"
	"path/filepath"
	"testing"
	"time"
)

func TestLeaderElectionFlags(t *testing.T) {
	o := defaultOptions()
	fs := flag.NewFlagSet("engine", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.bindFlags(fs)
	if err := fs.Parse([]string{"--leader-election", "--leader-election-namespace=ops", "--leader-election-id=mc", "--leader-election-lease-duration=30s"}); err != nil {
		t.Fatal(err)
	}
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	got := o.leader
	if !got.Enabled || got.Namespace != "ops" || got.ID != "mc" || got.ResourceLock != "leases" || got.LeaseDuration != 30*time.Second || got.RenewDeadline != 10*time.Second || got.RetryPeriod != 2*time.Second {
		t.Errorf("options = %+v", got)
	}
}

func TestLeaderElectionIsOffByDefault(t *testing.T) {
	o := defaultOptions()
	o.leader.NamespaceFile = filepath.Join(t.TempDir(), "absent")
	if err := o.validate(); err != nil {
		t.Fatalf("defaults refused out of cluster: %v", err)
	}
	if o.leader.Enabled || o.leader.ID != "metacontroller" || o.leader.ResourceLock != "leases" {
		t.Errorf("defaults = %+v", o.leader)
	}
}

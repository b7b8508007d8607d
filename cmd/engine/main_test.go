package main

import (
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/metalambda/metalambda/internal/apis/metacontroller/v1alpha1"
)

func TestInvalidFlagsAreRefused(t *testing.T) {
	for _, tt := range []struct {
		set  func(*options)
		want string
	}{
		{func(o *options) { o.applyStrategy = "magic" }, "unknown apply strategy"},
		{func(o *options) { o.targetLabelSelector = "a in (" }, "--target-label-selector"},
		{func(o *options) { o.qps = 0 }, "--client-go-qps"},
		{func(o *options) { o.qps, o.burst = 10, 0 }, "--client-go-burst"},
		{func(o *options) { o.engine.Workers = 0 }, "workers"},
		{func(o *options) { o.gcPercent = 0 }, "--gc-percent"},
		{func(o *options) { o.memoryLimit = "lots" }, "--memory-limit"},
		{func(o *options) { o.memoryLimit = "-1Gi" }, "--memory-limit"},
	} {
		o := defaultOptions()
		tt.set(o)
		if err := o.validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("validate() = %v, want an error about %q", err, tt.want)
		}
	}
}

func TestNegativeQPSDisablesTheClientRateLimit(t *testing.T) {
	o := defaultOptions()
	fs := flag.NewFlagSet("engine", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.bindFlags(fs)
	if o.explicitRate {
		t.Fatal("the rate limit counts as explicit before any flag is given")
	}
	if err := fs.Parse([]string{"--client-go-qps=-1"}); err != nil {
		t.Fatal(err)
	}
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	if o.qps != -1 || !o.explicitRate {
		t.Errorf("--client-go-qps=-1 gave qps %g, explicit %v", o.qps, o.explicitRate)
	}
}

func TestResolveServiceFlag(t *testing.T) {
	o := defaultOptions()
	fs := flag.NewFlagSet("engine", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.bindFlags(fs)
	if err := fs.Parse([]string{"--resolve-service", "metalambda-gateway.metalambda-system=http://127.0.0.1:8081/"}); err != nil {
		t.Fatal(err)
	}
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	url, ok := o.engine.ResolveService(v1alpha1.ServiceReference{Name: "metalambda-gateway", Namespace: "metalambda-system"})
	if !ok || url != "http://127.0.0.1:8081" {
		t.Errorf("resolved %q, %v", url, ok)
	}
	if _, ok := o.engine.ResolveService(v1alpha1.ServiceReference{Name: "other", Namespace: "x"}); ok {
		t.Error("an unmapped service was resolved")
	}
	if err := fs.Parse([]string{"--resolve-service", "nonsense"}); err == nil {
		t.Error("a malformed mapping was accepted")
	}
}

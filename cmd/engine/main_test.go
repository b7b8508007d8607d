package main

import (
	"strings"
	"testing"
)

func TestInvalidFlagsAreRefused(t *testing.T) {
	for _, tt := range []struct {
		set  func(*options)
		want string
	}{
		{func(o *options) { o.applyStrategy = "magic" }, "unknown apply strategy"},
		{func(o *options) { o.targetLabelSelector = "a in (" }, "--target-label-selector"},
		{func(o *options) { o.qps = 0 }, "--client-go-qps"},
		{func(o *options) { o.engine.Workers = 0 }, "workers"},
	} {
		o := defaultOptions()
		tt.set(o)
		if err := o.validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("validate() = %v, want an error about %q", err, tt.want)
		}
	}
}

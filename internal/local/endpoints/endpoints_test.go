package endpoints

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

func TestChoose(t *testing.T) {
	ready := discoveryv1.Endpoint{Addresses: []string{"ready"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}
	unset := discoveryv1.Endpoint{Addresses: []string{"unset"}}
	notReady := discoveryv1.Endpoint{Addresses: []string{"not-ready"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)}}
	draining := discoveryv1.Endpoint{Addresses: []string{"draining"}, Conditions: discoveryv1.EndpointConditions{
		Ready: ptr.To(false), Serving: ptr.To(true), Terminating: ptr.To(true)}}
	stopping := discoveryv1.Endpoint{Addresses: []string{"stopping"}, Conditions: discoveryv1.EndpointConditions{
		Ready: ptr.To(false), Serving: ptr.To(false), Terminating: ptr.To(true)}}
	servingUnknown := discoveryv1.Endpoint{Addresses: []string{"serving-unknown"}, Conditions: discoveryv1.EndpointConditions{
		Ready: ptr.To(false), Terminating: ptr.To(true)}}
	for _, tc := range []struct {
		name string
		eps  []discoveryv1.Endpoint
		want []string
	}{
		{"ready ones only, while there are", []discoveryv1.Endpoint{draining, ready, notReady, unset}, []string{"ready", "unset"}},
		{"none ready: those serving as they terminate", []discoveryv1.Endpoint{notReady, draining, stopping, servingUnknown}, []string{"draining"}},
		{"none ready or serving", []discoveryv1.Endpoint{notReady, stopping, servingUnknown}, nil},
		{"none", nil, nil},
	} {
		got := Choose(func(use func(discoveryv1.EndpointConditions) bool) []string {
			var out []string
			for _, e := range tc.eps {
				if use(e.Conditions) {
					out = append(out, e.Addresses...)
				}
			}
			return out
		})
		if !cmp.Equal(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

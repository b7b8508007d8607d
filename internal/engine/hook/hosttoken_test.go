package hook

import (
	"net/http"
	"testing"
)

type recordingDoer struct{ auth []string }

func (d *recordingDoer) Do(req *http.Request) (*http.Response, error) {
	d.auth = append(d.auth, req.Header.Get("Authorization"))
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
}

// TestTokenForHosts: the token goes to the hosts named, a Service under any of its
// DNS names, and nowhere else; a call with its own Authorization keeps it.
func TestTokenForHosts(t *testing.T) {
	for _, tt := range []struct {
		name  string
		hosts []string
		url   string
		own   string
		want  string
	}{
		{"address", []string{"127.0.0.1:8081"}, "http://127.0.0.1:8081/hooks/ns/f", "", "Bearer s3cret"},
		{"address, another port", []string{"127.0.0.1:8081"}, "http://127.0.0.1:9999/hooks/ns/f", "", ""},
		{"service", []string{"gw.system"}, "http://gw.system/hooks/ns/f", "", "Bearer s3cret"},
		{"service with port", []string{"gw.system"}, "http://gw.system:80/hooks/ns/f", "", "Bearer s3cret"},
		{"service.svc", []string{"gw.system"}, "http://gw.system.svc:80/hooks/ns/f", "", "Bearer s3cret"},
		{"service, cluster domain", []string{"gw.system"}, "http://GW.system.svc.cluster.local./hooks/ns/f", "", "Bearer s3cret"},
		{"another service", []string{"gw.system"}, "http://gw.systemx/hooks/ns/f", "", ""},
		{"another cluster domain", []string{"gw.system"}, "http://gw.system.svc.example.com/hooks/ns/f", "", ""},
		{"another cluster domain, named", []string{"gw.system.svc.example.com"}, "http://gw.system.svc.example.com/hooks/ns/f", "", "Bearer s3cret"},
		{"another namespace", []string{"gw.system"}, "http://gw.system2.svc/hooks/ns/f", "", ""},
		{"a name under the service", []string{"gw.system"}, "http://evil.gw.system/hooks/ns/f", "", ""},
		{"elsewhere", []string{"gw.system"}, "http://hooks.example/sync", "", ""},
		{"own authorization", []string{"gw.system"}, "http://gw.system/hooks/ns/f", "Bearer mine", "Bearer mine"},
	} {
		next := &recordingDoer{}
		d := TokenForHosts{Hosts: tt.hosts, Token: "s3cret", Next: next}
		req, _ := http.NewRequest(http.MethodPost, tt.url, nil)
		if tt.own != "" {
			req.Header.Set("Authorization", tt.own)
		}
		if _, err := d.Do(req); err != nil {
			t.Fatal(err)
		}
		if next.auth[0] != tt.want {
			t.Errorf("%s: Authorization %q, want %q", tt.name, next.auth[0], tt.want)
		}
	}
}

package redact

import "testing"

func TestJSON(t *testing.T) {
	for _, tt := range []struct{ name, in, want string }{
		{"secret data and stringData", `{"kind":"Secret","data":{"a":"YQ=="},"stringData":{"b":"c"}}`, `{"data":{"a":"[redacted]"},"kind":"Secret","stringData":{"b":"[redacted]"}}`},
		{"nested secret in a list", `{"children":[{"kind":"Secret","data":{"k":"v"}},{"kind":"ConfigMap","data":{"k":"v"}}]}`, `{"children":[{"data":{"k":"[redacted]"},"kind":"Secret"},{"data":{"k":"v"},"kind":"ConfigMap"}]}`},
		{"authorization value", `{"headers":{"Authorization":"Bearer x"}}`, `{"headers":{"Authorization":"[redacted]"}}`},
		{"escaped kind", `{"kind":"Secr\u0065t","data":{"k":"v"}}`, `{"data":{"k":"[redacted]"},"kind":"Secret"}`},
		{"nothing secret is left as it is", `{"kind":"ConfigMap",  "data":{"k":"v"}}`, `{"kind":"ConfigMap",  "data":{"k":"v"}}`},
		{"not JSON", `{"kind":"Secret"`, `{"bytes":16,"redacted":"the body is not JSON"}`},
		{"empty", ``, ``},
	} {
		if got := string(JSON([]byte(tt.in))); got != tt.want {
			t.Errorf("%s: JSON(%s) = %s, want %s", tt.name, tt.in, got, tt.want)
		}
	}
}

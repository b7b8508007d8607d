package export

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/metalambda/metalambda/internal/tracing"
)

// env is a Lookup of a fixed environment.
func env(vars map[string]string) Lookup {
	return func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
}

func TestNoOTELVariablesCreateNoExporter(t *testing.T) {
	for _, vars := range []map[string]string{
		{},
		{"OTEL_SERVICE_NAME": "x", "OTEL_TRACES_SAMPLER": "always_on", "OTEL_RESOURCE_ATTRIBUTES": "a=b"},
		{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"},
		{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "console"},
	} {
		s, err := New(context.Background(), "svc", env(vars), io.Discard)
		if err != nil {
			t.Fatalf("%v: %v", vars, err)
		}
		if s.Enabled() || s.Provider != nil || s.sdk != nil || len(s.Exporters) > 0 {
			t.Errorf("%v: tracing is on (%+v), want off with no exporter", vars, s)
		}
		if err := s.Shutdown(context.Background()); err != nil {
			t.Errorf("%v: Shutdown of tracing off = %v", vars, err)
		}
	}
}

// An OTLP endpoint alone turns tracing on, over http/protobuf: the collector gets
// the spans, with the service's name, when the setup shuts down.
func TestOTLPEndpointExportsOverHTTP(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	var bodies [][]byte
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		paths, bodies = append(paths, r.URL.Path), append(bodies, body)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	t.Setenv("OTEL_SERVICE_NAME", "engine-under-test")
	s, err := FromEnv(context.Background(), "metalambda-engine")
	if err != nil {
		t.Fatal(err)
	}
	if !s.Enabled() || s.Protocol != ProtocolHTTP || strings.Join(s.Exporters, ",") != ExporterOTLP {
		t.Fatalf("setup = %+v, want otlp over %s", s, ProtocolHTTP)
	}
	_, span := tracing.Start(context.Background(), tracing.Tracer(s.Provider), "sync Thing ns/p")
	span.End()
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(paths) != 1 || paths[0] != "/v1/traces" {
		t.Fatalf("the collector got %v, want one POST /v1/traces", paths)
	}
	for _, want := range []string{"sync Thing ns/p", "engine-under-test"} {
		if !bytes.Contains(bodies[0], []byte(want)) {
			t.Errorf("the export holds no %q", want)
		}
	}
}

func TestConsoleExporterAndResource(t *testing.T) {
	var out bytes.Buffer
	s, err := New(context.Background(), "metalambda-gateway", env(map[string]string{
		"OTEL_TRACES_EXPORTER": "console", "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=test,team=a%20b",
	}), &out)
	if err != nil {
		t.Fatal(err)
	}
	_, span := tracing.Start(context.Background(), tracing.Tracer(s.Provider), "hook ns/fn")
	span.End()
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"Name":"hook ns/fn"`, `"metalambda-gateway"`, `"a b"`, `"deployment.environment"`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("console output holds no %s:\n%s", want, out.String())
		}
	}
}

func TestBadValuesNameTheVariable(t *testing.T) {
	for _, tt := range []struct {
		vars map[string]string
		want string
	}{
		{map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, `OTEL_TRACES_EXPORTER: unknown trace exporter "zipkin"`},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, `OTEL_EXPORTER_OTLP_PROTOCOL: unsupported OTLP protocol "http/json"`},
		{map[string]string{"OTEL_TRACES_EXPORTER": "console", "OTEL_TRACES_SAMPLER": "sometimes"}, `OTEL_TRACES_SAMPLER: unsupported sampler "sometimes"`},
		{map[string]string{"OTEL_TRACES_EXPORTER": "console", "OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"}, `OTEL_TRACES_SAMPLER_ARG: "2" is not a sampling ratio`},
		{map[string]string{"OTEL_TRACES_EXPORTER": "console", "OTEL_RESOURCE_ATTRIBUTES": "novalue"}, `OTEL_RESOURCE_ATTRIBUTES: "novalue" is not key=value`},
	} {
		_, err := New(context.Background(), "svc", env(tt.vars), io.Discard)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: error %v, want one containing %q", tt.vars, err, tt.want)
		}
	}
}

func TestSamplers(t *testing.T) {
	for _, tt := range []struct {
		sampler, arg string
		sampled      bool
	}{
		{"", "", true},
		{"always_off", "", false},
		{"parentbased_always_off", "", false},
		{"traceidratio", "0", false},
		{"parentbased_traceidratio", "1", true},
	} {
		sampler, err := samplerOf(env(map[string]string{"OTEL_TRACES_SAMPLER": tt.sampler, "OTEL_TRACES_SAMPLER_ARG": tt.arg}))
		if err != nil {
			t.Fatal(err)
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler))
		_, span := tracing.Start(context.Background(), tracing.Tracer(tp), "s")
		if got := tracing.TraceID(span) != ""; got != tt.sampled {
			t.Errorf("sampler %q %q: a trace ID recorded = %v, want %v", tt.sampler, tt.arg, got, tt.sampled)
		}
		span.End()
	}
}

func TestMain(m *testing.M) {
	// The OTLP exporters read the process's environment: start from none of it.
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "OTEL_") {
			_ = os.Unsetenv(name)
		}
	}
	os.Exit(m.Run())
}

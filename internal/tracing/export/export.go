// Package export sets up the OpenTelemetry tracing of a binary (cmd/engine,
// cmd/gateway) from the standard OTEL_* environment variables: its provider and
// its exporters. It is apart from package tracing, whose span helpers the
// gateway's worker executable links too, so that the worker links no exporter
// (gRPC, protobuf, the SDK): their initialization would cost every worker's
// start and memory.
//
// Tracing is off unless OTEL_TRACES_EXPORTER names an exporter (otlp, console) or
// an OTLP endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT,
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT).
package export

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/metalambda/metalambda/internal/version"
)

// Exporter names of OTEL_TRACES_EXPORTER.
const (
	ExporterOTLP    = "otlp"
	ExporterConsole = "console"
	ExporterNone    = "none"
)

// OTLP protocols of OTEL_EXPORTER_OTLP_PROTOCOL.
const (
	ProtocolHTTP = "http/protobuf"
	ProtocolGRPC = "grpc"
)

// Setup is the tracing of a binary: a provider and what it exports to.
type Setup struct {
	// Provider makes the binary's tracers; nil when tracing is off.
	Provider trace.TracerProvider
	// Exporters are the exporters in use ("otlp", "console"), for the start log;
	// Protocol is the OTLP protocol when otlp is one.
	Exporters []string
	Protocol  string
	sdk       *sdktrace.TracerProvider
}

// Enabled reports whether spans are exported.
func (s *Setup) Enabled() bool { return s != nil && s.Provider != nil }

// Shutdown exports the spans still buffered and stops the exporters; it does nothing
// when tracing is off.
func (s *Setup) Shutdown(ctx context.Context) error {
	if s == nil || s.sdk == nil {
		return nil
	}
	return s.sdk.Shutdown(ctx)
}

// Lookup reads an environment variable, as os.LookupEnv does.
type Lookup func(string) (string, bool)

// FromEnv sets up tracing from the OTEL_* variables of the process.
func FromEnv(ctx context.Context, service string) (*Setup, error) {
	return New(ctx, service, os.LookupEnv, os.Stdout)
}

// New sets up tracing from the OTEL_* variables lookup reads, with service as the
// default service.name (OTEL_SERVICE_NAME and a service.name in
// OTEL_RESOURCE_ATTRIBUTES win). Without an exporter it returns a Setup that is off
// and creates nothing. The console exporter writes to console. The OTLP exporters
// read the rest of their settings (endpoint, headers, TLS, timeout) from the
// process's environment, as the OpenTelemetry SDK does. A value it does not know is
// an error that names the variable.
func New(ctx context.Context, service string, lookup Lookup, console io.Writer) (*Setup, error) {
	exporters, err := exportersOf(lookup)
	if err != nil || len(exporters) == 0 {
		return &Setup{}, err
	}
	sampler, err := samplerOf(lookup)
	if err != nil {
		return nil, err
	}
	res, err := resourceOf(service, lookup)
	if err != nil {
		return nil, err
	}
	s := &Setup{Exporters: exporters}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithSampler(sampler), sdktrace.WithResource(res)}
	for _, name := range exporters {
		exp, err := s.exporter(ctx, name, lookup, console)
		if err != nil {
			return nil, err
		}
		opts = append(opts, sdktrace.WithBatcher(exp))
	}
	s.sdk = sdktrace.NewTracerProvider(opts...)
	s.Provider = s.sdk
	return s, nil
}

// exportersOf reads OTEL_TRACES_EXPORTER, a comma-separated list: empty means otlp
// when an OTLP endpoint is set, else none. OTEL_SDK_DISABLED=true turns all off.
func exportersOf(lookup Lookup) ([]string, error) {
	if v, _ := lookup("OTEL_SDK_DISABLED"); strings.EqualFold(strings.TrimSpace(v), "true") {
		return nil, nil
	}
	v, _ := lookup("OTEL_TRACES_EXPORTER")
	if strings.TrimSpace(v) == "" {
		if set(lookup, "OTEL_EXPORTER_OTLP_ENDPOINT") || set(lookup, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
			return []string{ExporterOTLP}, nil
		}
		return nil, nil
	}
	var out []string
	for _, name := range strings.Split(v, ",") {
		name = strings.ToLower(strings.TrimSpace(name))
		switch name {
		case ExporterNone:
			return nil, nil
		case ExporterOTLP, ExporterConsole:
			if !slices.Contains(out, name) {
				out = append(out, name)
			}
		default:
			return nil, fmt.Errorf("OTEL_TRACES_EXPORTER: unknown trace exporter %q (want %s, %s or %s)", name, ExporterOTLP, ExporterConsole, ExporterNone)
		}
	}
	return out, nil
}

func set(lookup Lookup, name string) bool {
	v, _ := lookup(name)
	return strings.TrimSpace(v) != ""
}

func (s *Setup) exporter(ctx context.Context, name string, lookup Lookup, console io.Writer) (sdktrace.SpanExporter, error) {
	if name == ExporterConsole {
		return stdouttrace.New(stdouttrace.WithWriter(console))
	}
	protocol, err := protocolOf(lookup)
	if err != nil {
		return nil, err
	}
	s.Protocol = protocol
	if protocol == ProtocolGRPC {
		return otlptracegrpc.New(ctx)
	}
	return otlptracehttp.New(ctx)
}

// protocolOf reads OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else
// OTEL_EXPORTER_OTLP_PROTOCOL; http/protobuf by default, as the specification says.
func protocolOf(lookup Lookup) (string, error) {
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		v, _ := lookup(name)
		switch v = strings.TrimSpace(v); v {
		case "":
			continue
		case ProtocolHTTP, ProtocolGRPC:
			return v, nil
		default:
			return "", fmt.Errorf("%s: unsupported OTLP protocol %q (want %s or %s)", name, v, ProtocolHTTP, ProtocolGRPC)
		}
	}
	return ProtocolHTTP, nil
}

// samplerOf reads OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG;
// parentbased_always_on by default.
func samplerOf(lookup Lookup) (sdktrace.Sampler, error) {
	name, _ := lookup("OTEL_TRACES_SAMPLER")
	name = strings.ToLower(strings.TrimSpace(name))
	ratio := func() (float64, error) {
		arg, ok := lookup("OTEL_TRACES_SAMPLER_ARG")
		if !ok || strings.TrimSpace(arg) == "" {
			return 1, nil
		}
		r, err := strconv.ParseFloat(strings.TrimSpace(arg), 64)
		if err != nil || r < 0 || r > 1 {
			return 0, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG: %q is not a sampling ratio between 0 and 1", arg)
		}
		return r, nil
	}
	switch name {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "traceidratio", "parentbased_traceidratio":
		r, err := ratio()
		if err != nil {
			return nil, err
		}
		if name == "traceidratio" {
			return sdktrace.TraceIDRatioBased(r), nil
		}
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(r)), nil
	}
	return nil, fmt.Errorf("OTEL_TRACES_SAMPLER: unsupported sampler %q (want always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio)", name)
}

// resourceOf is the service's resource: service.name and service.version, then
// OTEL_RESOURCE_ATTRIBUTES, then OTEL_SERVICE_NAME.
func resourceOf(service string, lookup Lookup) (*resource.Resource, error) {
	attrs := map[string]string{"service.name": service, "service.version": version.Get()}
	if v, _ := lookup("OTEL_RESOURCE_ATTRIBUTES"); strings.TrimSpace(v) != "" {
		if err := parseResourceAttributes(v, attrs); err != nil {
			return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
		}
	}
	if v, _ := lookup("OTEL_SERVICE_NAME"); strings.TrimSpace(v) != "" {
		attrs["service.name"] = strings.TrimSpace(v)
	}
	kvs := make([]attribute.KeyValue, 0, len(attrs))
	for k, v := range attrs {
		kvs = append(kvs, attribute.String(k, v))
	}
	return resource.NewSchemaless(kvs...), nil
}

// parseResourceAttributes reads "key1=value1,key2=value2", values percent-encoded.
func parseResourceAttributes(v string, into map[string]string) error {
	for _, pair := range strings.Split(v, ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		key, value, ok := strings.Cut(pair, "=")
		key = strings.TrimSpace(key)
		if !ok || key == "" {
			return fmt.Errorf("%q is not key=value", pair)
		}
		decoded, err := url.PathUnescape(strings.TrimSpace(value))
		if err != nil {
			return fmt.Errorf("the value of %s: %w", key, err)
		}
		into[key] = decoded
	}
	return nil
}

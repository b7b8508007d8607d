package hook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	kjson "sigs.k8s.io/json"

	"github.com/metalambda/metalambda/internal/jsonvalue"
	"github.com/metalambda/metalambda/internal/tracing"
	"github.com/metalambda/metalambda/internal/tracing/propagate"
)

// Hook names for CallInfo.Hook.
const (
	HookSync      = "sync"
	HookFinalize  = "finalize"
	HookCustomize = "customize"
)

// DefaultMaxResponseBytes is the largest response body a Client reads by default.
const DefaultMaxResponseBytes int64 = 64 << 20

// maxDrainBytes is how much of an unread body is discarded so that the connection can
// be reused; larger leftovers close the connection instead.
const maxDrainBytes = 256 << 10

// Doer sends one HTTP request. *http.Client is a Doer.
type Doer interface {
	Do(*http.Request) (*http.Response, error)
}

// CallInfo names a call for errors, metrics and the ETag cache.
type CallInfo struct {
	Controller string
	// ControllerType is "CompositeController" or "DecoratorController".
	ControllerType string
	// Hook is HookSync, HookFinalize or HookCustomize.
	Hook string
	// Parent is the object the call is about; ETag caching keys on it.
	Parent ObjectKey
	// ParentAPIVersion and ParentUID complete Parent for a Recorder.
	ParentAPIVersion, ParentUID string
}

// HTTP headers of ETag caching.
const (
	headerETag        = "ETag"
	headerIfNoneMatch = "If-None-Match"
)

// Client calls webhooks. The zero value is ready to use.
type Client struct {
	// HTTP sends the requests; nil means a shared client with keep-alives and no
	// client-level timeout (each call's context carries its endpoint's timeout).
	HTTP Doer
	// Metrics records the calls; nil records nothing.
	Metrics *Metrics
	// MaxResponseBytes caps the response body; zero or less means
	// DefaultMaxResponseBytes.
	MaxResponseBytes int64
	// Recorder is told about every call; nil records nothing.
	Recorder Recorder
	// Tracer makes a client span of every call, whose W3C trace context the request
	// carries (traceparent); nil makes none, but a call still carries the context of
	// its caller's span when there is one.
	Tracer trace.Tracer
	// NoRedirects makes a 3xx answer the call's error instead of following it (with
	// the engine's HTTP clients, see CheckRedirect): a namespaced controller's hook
	// would otherwise send the engine's request anywhere it names in Location.
	NoRedirects bool
}

// noRedirectsKey marks the context of a call that follows no redirect.
type noRedirectsKey struct{}

// CheckRedirect is the redirect policy of the engine's hook HTTP clients: the calls
// of a Client with NoRedirects get the 3xx answer itself; the others follow up to
// 10 redirects, as Go's default client does (and upstream's hook client).
func CheckRedirect(req *http.Request, via []*http.Request) error {
	if req.Context().Value(noRedirectsKey{}) != nil {
		return http.ErrUseLastResponse
	}
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	return nil
}

// Recorder keeps a record of hook calls. RecordCall runs on the caller's goroutine
// after each call and must not block; it may keep the call's body slices, which the
// Client never changes.
type Recorder interface {
	RecordCall(Call)
}

// Call is one finished hook call as a Recorder sees it.
type Call struct {
	Info     CallInfo
	URL      string
	Start    time.Time
	Duration time.Duration
	// Status is the HTTP status of the answer, 0 when none came.
	Status int
	// Request is the JSON sent; Response the body received with a 200 (or the cached
	// body a 304 reused), nil otherwise.
	Request, Response []byte
	Err               error
	// TraceID is the trace of the call's span, "" when it was not traced or not
	// sampled.
	TraceID string
}

// sharedHTTP is the Doer of clients that do not set one. It holds idle connections
// only, no configuration that changes.
var sharedHTTP = &http.Client{Transport: newTransport(), CheckRedirect: CheckRedirect}

func newTransport() *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          1000,
		MaxIdleConnsPerHost:   100,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

// errDeadline is the cancellation cause of a call that ran out of its endpoint's time.
var errDeadline = errors.New("hook deadline")

// Call POSTs request as JSON to ep and decodes a 200 answer into response (a pointer;
// nil discards the body), strictly when ep.Strict is set. A response must be a JSON
// object: null, an array, a string, a number or an empty body is a bad response. It
// gives up after ep.Timeout (DefaultTimeout when not positive) or when ctx ends.
//
// With ep.ETags set, the last response with an ETag is kept per info.Parent: the next
// call sends If-None-Match, and a 304 Not Modified or 412 Precondition Failed answer
// reuses the kept response. Either status without If-None-Match sent is an error.
//
// Errors name the URL and are one of: *ThrottledError (429 with Retry-After),
// *StatusError (any other non-200), ErrTimeout, ErrBadResponse (undecodable, not an
// object, or oversized body), or the wrapped transport or context error.
func (c *Client) Call(ctx context.Context, ep Endpoint, info CallInfo, request, response any) error {
	payload, err := jsonvalue.Marshal(request) // as json.Marshal, faster for the hook wire types
	if err != nil {
		return fmt.Errorf("POST %s: encode request: %w", ep.URL, err)
	}
	ctx, span := c.startSpan(ctx, ep, info)
	done := c.Metrics.start(info, ep.URL)
	start := time.Now()
	var (
		code string
		body []byte
	)
	if err = ep.precheck(ctx); err != nil {
		code = CodeError
	} else {
		code, body, err = c.post(ctx, ep, info, payload, response)
	}
	done(code)
	status, _ := strconv.Atoi(code)
	if span.IsRecording() && status != 0 {
		span.SetAttributes(attribute.Int("http.response.status_code", status))
	}
	tracing.End(span, err)
	if c.Recorder != nil {
		c.Recorder.RecordCall(Call{Info: info, URL: ep.URL, Start: start, Duration: time.Since(start), Status: status, Request: payload, Response: body, Err: err, TraceID: tracing.TraceID(span)})
	}
	return err
}

// precheck runs ep.Precheck, if any: its error names the URL not called.
func (ep Endpoint) precheck(ctx context.Context) error {
	if ep.Precheck == nil {
		return nil
	}
	if err := ep.Precheck(ctx); err != nil {
		return fmt.Errorf("POST %s: not sent: %w", ep.URL, err)
	}
	return nil
}

// startSpan starts the client span of a call, "hook sync" say, when the client has a
// tracer.
func (c *Client) startSpan(ctx context.Context, ep Endpoint, info CallInfo) (context.Context, trace.Span) {
	if c.Tracer == nil {
		return tracing.Start(ctx, nil, "")
	}
	return c.Tracer.Start(ctx, "hook "+info.Hook, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("metalambda.controller", info.ControllerType+"/"+info.Controller),
		attribute.String("metalambda.hook", info.Hook),
		attribute.String("metalambda.parent", parentName(info.Parent)),
		attribute.String("http.request.method", http.MethodPost),
		attribute.String("url.full", ep.URL),
	))
}

// post sends payload and handles the answer; code is the metrics label of the result
// and body the response body of a 200 (or 304).
func (c *Client) post(ctx context.Context, ep Endpoint, info CallInfo, payload []byte, response any) (code string, body []byte, err error) {
	ctx, cancel := context.WithTimeoutCause(ctx, ep.timeout(), errDeadline)
	defer cancel()
	if c.NoRedirects {
		ctx = context.WithValue(ctx, noRedirectsKey{}, true)
	}
	req, err := newRequest(ctx, ep.URL, payload)
	if err != nil {
		return CodeError, nil, fmt.Errorf("POST %s: %w", ep.URL, err)
	}
	if ep.Authorization != "" {
		req.Header.Set("Authorization", ep.Authorization)
	}
	cached := ep.ETags.get(info.Parent)
	if cached != nil {
		req.Header.Set(headerIfNoneMatch, cached.etag)
	}
	doer := c.doer()
	if ep.HTTP != nil {
		doer = ep.HTTP
	}
	resp, err := doer.Do(req)
	if err != nil && notConnected(err) && ctx.Err() == nil {
		// The hook never saw the request (a replica that went away, say): once,
		// on a fresh connection, before the sync counts an error.
		resp, err = doer.Do(retryOf(req, payload))
	}
	if err != nil {
		code, err = transportFailure(ctx, ep, err)
		return code, nil, err
	}
	defer drainAndClose(resp.Body)
	return c.receive(ctx, ep, info, resp, cached, response)
}

// receive checks the status and decodes the body of resp into response: the body of
// cached when the hook says it has not changed.
func (c *Client) receive(ctx context.Context, ep Endpoint, info CallInfo, resp *http.Response, cached *etagEntry, response any) (code string, body []byte, err error) {
	code = strconv.Itoa(resp.StatusCode)
	switch {
	case notModified(resp.StatusCode) && cached != nil:
		return code, cached.body, decode(ep, info, cached.body, response)
	case notModified(resp.StatusCode):
		return code, nil, fmt.Errorf("%w (no If-None-Match was sent)", statusFailure(ep.URL, resp))
	case resp.StatusCode != http.StatusOK:
		return code, nil, statusFailure(ep.URL, resp)
	}
	limit := c.maxResponseBytes()
	body, err = readBody(resp, limit)
	switch {
	case errors.Is(err, errTooLarge):
		return code, nil, fmt.Errorf("POST %s: %w: body is larger than %d bytes", ep.URL, ErrBadResponse, limit)
	case err != nil:
		code, err = transportFailure(ctx, ep, err)
		return code, nil, err
	}
	if err := decode(ep, info, body, response); err != nil {
		return code, body, err
	}
	ep.ETags.store(info.Parent, resp.Header.Get(headerETag), body)
	return code, body, nil
}

// parentName is "namespace/name", or "name" for a cluster-scoped parent.
func parentName(k ObjectKey) string {
	if k.Namespace == "" {
		return k.Name
	}
	return k.Namespace + "/" + k.Name
}

// notModified reports whether code says "the response you have is current": 304,
// or 412 as Metacontroller also accepts it.
func notModified(code int) bool {
	return code == http.StatusNotModified || code == http.StatusPreconditionFailed
}

func (c *Client) doer() Doer {
	if c.HTTP == nil {
		return sharedHTTP
	}
	return c.HTTP
}

func (c *Client) maxResponseBytes() int64 {
	if c.MaxResponseBytes <= 0 {
		return DefaultMaxResponseBytes
	}
	return c.MaxResponseBytes
}

func (ep Endpoint) timeout() time.Duration {
	if ep.Timeout <= 0 {
		return DefaultTimeout
	}
	return ep.Timeout
}

func newRequest(ctx context.Context, u string, payload []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(payload))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "metalambda")
	propagate.Inject(ctx, req.Header)
	// Hooks are idempotent by contract: net/http may then resend the request
	// when a kept-alive connection turns out closed before any answer. A nil
	// value marks the request so without sending the header.
	req.Header["X-Idempotency-Key"] = nil
	return req, nil
}

// retryOf is req again, with a body to send anew.
func retryOf(req *http.Request, payload []byte) *http.Request {
	again := req.Clone(req.Context())
	again.Body = io.NopCloser(bytes.NewReader(payload))
	return again
}

// notConnected reports whether err says no connection to the hook was made, so
// the hook cannot have seen the request.
func notConnected(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// transportFailure classifies an error of sending or reading: ErrTimeout when the
// endpoint's time ran out, else the error itself.
func transportFailure(ctx context.Context, ep Endpoint, err error) (string, error) {
	if errors.Is(context.Cause(ctx), errDeadline) {
		return CodeTimeout, fmt.Errorf("POST %s: %w after %s", ep.URL, ErrTimeout, ep.timeout())
	}
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err // its message repeats the method and URL
	}
	return CodeError, fmt.Errorf("POST %s: %w", ep.URL, err)
}

// statusFailure is the error of a non-200 answer.
func statusFailure(u string, resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, MaxErrorBodyBytes))
	if resp.StatusCode == http.StatusTooManyRequests {
		if after, ok := parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
			return &ThrottledError{URL: u, RetryAfter: after}
		}
	}
	return &StatusError{URL: u, Code: resp.StatusCode, Body: string(body)}
}

// parseRetryAfter reads a Retry-After value: delay seconds or an HTTP date. A date in
// the past gives zero.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		maxSecs := int64(math.MaxInt64 / time.Second)
		return time.Duration(min(secs, maxSecs)) * time.Second, true
	}
	when, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(when.Sub(now), 0), true
}

var errTooLarge = errors.New("response body too large")

// readBody reads the body of resp, failing with errTooLarge past limit bytes.
func readBody(resp *http.Response, limit int64) ([]byte, error) {
	if resp.ContentLength > limit {
		return nil, errTooLarge
	}
	var data []byte
	var err error
	if resp.ContentLength >= 0 { // one allocation of the announced size, not ReadAll's doublings
		data = make([]byte, resp.ContentLength)
		_, err = io.ReadFull(resp.Body, data)
	} else {
		data, err = io.ReadAll(io.LimitReader(resp.Body, limit))
	}
	if err != nil {
		return nil, err
	}
	var more [1]byte
	if n, _ := io.ReadFull(resp.Body, more[:]); n > 0 {
		return nil, errTooLarge
	}
	return data, nil
}

func drainAndClose(body io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, maxDrainBytes))
	_ = body.Close()
}

// decode unmarshals body into response, strictly when ep says so. Both modes match
// JSON keys case-sensitively and decode whole numbers as int64, like Kubernetes. A
// body that is not a JSON object is refused before decoding: null would otherwise
// decode as an empty response, which asks to delete every child.
func decode(ep Endpoint, info CallInfo, body []byte, response any) error {
	if response == nil {
		return nil
	}
	if !isObject(body) {
		return fmt.Errorf("%w: %s %s answered %s; want a JSON object", ErrBadResponse, hookTitle(info), ep.URL, describeBody(body))
	}
	if err := unmarshal(body, response, ep.Strict); err != nil {
		return fmt.Errorf("POST %s: %w: %w", ep.URL, ErrBadResponse, err)
	}
	return nil
}

// isObject reports whether body starts, after JSON whitespace, with an object.
func isObject(body []byte) bool {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	return len(trimmed) > 0 && trimmed[0] == '{'
}

// hookTitle is "sync hook", "customize hook", ... or "hook" when unnamed.
func hookTitle(info CallInfo) string {
	if info.Hook == "" {
		return "hook"
	}
	return info.Hook + " hook"
}

// maxQuotedBody is how much of a refused body an error quotes.
const maxQuotedBody = 64

// describeBody quotes the start of a refused body for an error message.
func describeBody(body []byte) string {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return "an empty body"
	}
	if len(trimmed) > maxQuotedBody {
		return strconv.Quote(string(trimmed[:maxQuotedBody])) + "..."
	}
	return strconv.Quote(string(trimmed))
}

// Parser is a response that can fill itself from an answer without reflection, as
// the decoder of hooks that are not strict would (hookapi.CompositeResponse.ParseJSON),
// or declines, left as it was, and is decoded by it.
type Parser interface {
	ParseJSON(data []byte) bool
}

func unmarshal(data []byte, v any, strict bool) error {
	if !strict {
		if p, ok := v.(Parser); ok && p.ParseJSON(data) {
			return nil
		}
		return kjson.UnmarshalCaseSensitivePreserveInts(data, v)
	}
	strictErrs, err := kjson.UnmarshalStrict(data, v)
	if err != nil {
		return err
	}
	if len(strictErrs) > 0 {
		return fieldErrors(strictErrs)
	}
	return nil
}

// fieldErrors are the complaints of strict decoding, on one line.
type fieldErrors []error

func (e fieldErrors) Error() string {
	msgs := make([]string, len(e))
	for i, err := range e {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "; ")
}

func (e fieldErrors) Unwrap() []error { return e }

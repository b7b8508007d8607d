package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	fnv1 "github.com/metalambda/metalambda/internal/apis/metalambda/v1alpha1"
	"github.com/metalambda/metalambda/internal/httpapi"
)

// gatewayClient speaks the gateway's /v1 API for one namespace.
type gatewayClient struct {
	base      string // the gateway's URL, without a trailing slash
	source    string // where base came from, for error messages
	namespace string
	http      *http.Client
}

// invocation is one recorded call, as GET .../invocations lists it.
type invocation struct {
	Time       time.Time       `json:"time"`
	DurationMS float64         `json:"durationMs"`
	Source     string          `json:"source"`
	Status     int             `json:"status"`
	Error      string          `json:"error,omitempty"`
	Request    json.RawMessage `json:"request,omitempty"`
	Response   json.RawMessage `json:"response,omitempty"`
	Logs       string          `json:"logs,omitempty"`
}

// invokeResult is the answer of POST .../invoke.
type invokeResult struct {
	Response   json.RawMessage `json:"response"`
	Logs       string          `json:"logs"`
	DurationMS float64         `json:"durationMs"`
}

// functionSpec is the flat form of a Function that PUT takes.
type functionSpec struct {
	Runtime        string                       `json:"runtime"`
	Source         string                       `json:"source"`
	Handler        string                       `json:"handler,omitempty"`
	TimeoutSeconds int                          `json:"timeoutSeconds,omitempty"`
	Env            map[string]string            `json:"env,omitempty"`
	EnvFrom        []fnv1.EnvFromSource         `json:"envFrom,omitempty"`
	EnvValueFrom   map[string]fnv1.EnvVarSource `json:"envValueFrom,omitempty"`
}

func (c *gatewayClient) path(name, sub string) string {
	p := "/v1/namespaces/" + url.PathEscape(c.namespace) + "/functions"
	if name != "" {
		p += "/" + url.PathEscape(name)
	}
	if sub != "" {
		p += "/" + sub
	}
	return p
}

// do sends a request and decodes a 2xx answer into out (when out is not nil); any
// other answer is an *httpapi.Error.
func (c *gatewayClient) do(ctx context.Context, method, path string, body []byte, out any) (int, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, r)
	if err != nil {
		return 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("cannot reach the gateway at %s (%s): %w", c.base, c.source, unwrapURLError(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, fmt.Errorf("read the gateway's answer: %w", err)
	}
	if resp.StatusCode >= 300 {
		return resp.StatusCode, decodeError(resp.StatusCode, data)
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		return resp.StatusCode, nil
	}
	// apimachinery's json keeps integers as int64 in maps, as unstructured objects
	// need them (metadata.generation, status.observedGeneration).
	if err := utiljson.Unmarshal(data, out); err != nil {
		return resp.StatusCode, fmt.Errorf("the gateway at %s answered %s %s with something that is not its JSON: %w", c.base, method, path, err)
	}
	return resp.StatusCode, nil
}

// decodeError reads the gateway's error shape; anything else (a proxy's page, say)
// becomes an error that says the gateway answered it.
func decodeError(status int, data []byte) error {
	e := httpapi.ErrorFrom(status, data)
	if e.Code == "http_"+strconv.Itoa(status) {
		e.Message = "the gateway " + e.Message
	}
	return e
}

// unwrapURLError drops net/url's "Get \"http://...\":" prefix, which the caller's
// message already names.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// put creates or replaces a function; created tells which.
func (c *gatewayClient) put(ctx context.Context, name string, spec functionSpec) (*unstructured.Unstructured, bool, error) {
	body, err := json.Marshal(spec)
	if err != nil {
		return nil, false, err
	}
	obj := &unstructured.Unstructured{}
	status, err := c.do(ctx, http.MethodPut, c.path(name, ""), body, &obj.Object)
	return obj, status == http.StatusCreated, err
}

func (c *gatewayClient) get(ctx context.Context, name string) (*unstructured.Unstructured, error) {
	obj := &unstructured.Unstructured{}
	_, err := c.do(ctx, http.MethodGet, c.path(name, ""), nil, &obj.Object)
	return obj, err
}

func (c *gatewayClient) list(ctx context.Context) ([]unstructured.Unstructured, error) {
	var out struct {
		Items []map[string]any `json:"items"`
	}
	if _, err := c.do(ctx, http.MethodGet, c.path("", ""), nil, &out); err != nil {
		return nil, err
	}
	items := make([]unstructured.Unstructured, 0, len(out.Items))
	for _, item := range out.Items {
		items = append(items, unstructured.Unstructured{Object: item})
	}
	return items, nil
}

func (c *gatewayClient) delete(ctx context.Context, name string) error {
	_, err := c.do(ctx, http.MethodDelete, c.path(name, ""), nil, nil)
	return err
}

func (c *gatewayClient) invoke(ctx context.Context, name string, request []byte) (*invokeResult, error) {
	var out invokeResult
	_, err := c.do(ctx, http.MethodPost, c.path(name, "invoke"), request, &out)
	return &out, err
}

// invocations returns the function's recorded calls, newest first, and whether its
// history is on.
func (c *gatewayClient) invocations(ctx context.Context, name string) ([]invocation, bool, error) {
	var out struct {
		Items   []invocation `json:"items"`
		Enabled bool         `json:"enabled"`
	}
	_, err := c.do(ctx, http.MethodGet, c.path(name, "invocations"), nil, &out)
	return out.Items, out.Enabled, err
}

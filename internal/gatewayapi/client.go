package gatewayapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/metalambda/metalambda/internal/httpapi"
)

// Client calls the gateway's management API. BaseURL is the gateway's URL, e.g.
// "http://127.0.0.1:8080"; Token, when set, is sent as the bearer token; HTTP nil
// means http.DefaultClient. An error answer is an *httpapi.Error.
type Client struct {
	BaseURL string
	Token   string
	HTTP    *http.Client
}

// FunctionsPath is the API path of a namespace's functions, with more segments
// (a name, then "invoke", "invocations" or "replay").
func FunctionsPath(namespace string, segments ...string) string {
	p := "/v1/namespaces/" + url.PathEscape(namespace) + "/functions"
	for _, s := range segments {
		p += "/" + url.PathEscape(s)
	}
	return p
}

// List lists the functions of namespace.
func (c *Client) List(ctx context.Context, namespace string) ([]unstructured.Unstructured, error) {
	var out struct {
		Items []map[string]any `json:"items"`
	}
	if _, err := c.Do(ctx, http.MethodGet, FunctionsPath(namespace), nil, &out); err != nil {
		return nil, err
	}
	items := make([]unstructured.Unstructured, 0, len(out.Items))
	for _, item := range out.Items {
		items = append(items, unstructured.Unstructured{Object: item})
	}
	return items, nil
}

// Get reads one function.
func (c *Client) Get(ctx context.Context, namespace, name string) (*unstructured.Unstructured, error) {
	obj := &unstructured.Unstructured{}
	_, err := c.Do(ctx, http.MethodGet, FunctionsPath(namespace, name), nil, &obj.Object)
	return obj, err
}

// Create creates a function from body: a Function object, or a FunctionSpec with a
// name.
func (c *Client) Create(ctx context.Context, namespace string, body any) (*unstructured.Unstructured, error) {
	obj := &unstructured.Unstructured{}
	_, err := c.Do(ctx, http.MethodPost, FunctionsPath(namespace), body, &obj.Object)
	return obj, err
}

// Put creates or replaces a function from body (a FunctionSpec, or an object with a
// spec); created tells which.
func (c *Client) Put(ctx context.Context, namespace, name string, body any) (obj *unstructured.Unstructured, created bool, err error) {
	obj = &unstructured.Unstructured{}
	status, err := c.Do(ctx, http.MethodPut, FunctionsPath(namespace, name), body, &obj.Object)
	return obj, status == http.StatusCreated, err
}

// Delete deletes a function.
func (c *Client) Delete(ctx context.Context, namespace, name string) error {
	_, err := c.Do(ctx, http.MethodDelete, FunctionsPath(namespace, name), nil, nil)
	return err
}

// Invoke calls a function with request, a hook request's JSON.
func (c *Client) Invoke(ctx context.Context, namespace, name string, request json.RawMessage) (*InvokeResult, error) {
	var out InvokeResult
	_, err := c.Do(ctx, http.MethodPost, FunctionsPath(namespace, name, "invoke"), request, &out)
	return &out, err
}

// Invocations lists a function's recorded calls, newest first.
func (c *Client) Invocations(ctx context.Context, namespace, name string) (*InvocationList, error) {
	var out InvocationList
	_, err := c.Do(ctx, http.MethodGet, FunctionsPath(namespace, name, "invocations"), nil, &out)
	return &out, err
}

// LocalInvocations lists the calls that the replica at BaseURL recorded itself,
// newest first, without asking the other replicas (what replicas ask each other).
func (c *Client) LocalInvocations(ctx context.Context, namespace, name string) (*InvocationList, error) {
	var out InvocationList
	_, err := c.Do(ctx, http.MethodGet, FunctionsPath(namespace, name, "invocations")+"?local=true", nil, &out)
	return &out, err
}

// Revisions lists a function's revisions, newest first.
func (c *Client) Revisions(ctx context.Context, namespace, name string) (*RevisionList, error) {
	var out RevisionList
	_, err := c.Do(ctx, http.MethodGet, FunctionsPath(namespace, name, "revisions"), nil, &out)
	return &out, err
}

// Rollout asks for action (rollout.Pause, Resume, Promote or Abort) on the function's rollout in progress and returns the Function
// as written.
func (c *Client) Rollout(ctx context.Context, namespace, name, action string) (*unstructured.Unstructured, error) {
	obj := &unstructured.Unstructured{}
	_, err := c.Do(ctx, http.MethodPost, FunctionsPath(namespace, name, "rollout", action), nil, &obj.Object)
	return obj, err
}

// Replay runs a candidate against a function's recorded calls.
func (c *Client) Replay(ctx context.Context, namespace, name string, req ReplayRequest) (*ReplayResult, error) {
	var out ReplayResult
	_, err := c.Do(ctx, http.MethodPost, FunctionsPath(namespace, name, "replay"), req, &out)
	return &out, err
}

// Do sends body (JSON; nil for none, json.RawMessage as is) to path and decodes a 2xx
// answer into out when out is not nil; it returns the answer's status. An error
// answer is an *httpapi.Error; a failure to reach the gateway wraps net/url's error.
func (c *Client) Do(ctx context.Context, method, path string, body, out any) (int, error) {
	req, err := c.request(ctx, method, path, body)
	if err != nil {
		return 0, err
	}
	httpc := c.HTTP
	if httpc == nil {
		httpc = http.DefaultClient
	}
	resp, err := httpc.Do(req)
	if err != nil {
		return 0, err
	}
	if err := httpapi.ResponseError(resp); err != nil {
		return resp.StatusCode, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, fmt.Errorf("read the gateway's answer to %s %s: %w", method, path, err)
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		return resp.StatusCode, nil
	}
	// apimachinery's json keeps integers as int64 in maps, as unstructured objects
	// need them (metadata.generation, status.observedGeneration).
	if err := utiljson.Unmarshal(data, out); err != nil {
		return resp.StatusCode, fmt.Errorf("the gateway answered %s %s with something that is not its JSON: %w", method, path, err)
	}
	return resp.StatusCode, nil
}

func (c *Client) request(ctx context.Context, method, path string, body any) (*http.Request, error) {
	var r io.Reader
	if body != nil {
		data, ok := body.(json.RawMessage)
		if !ok {
			var err error
			if data, err = json.Marshal(body); err != nil {
				return nil, fmt.Errorf("encode the body of %s %s: %w", method, path, err)
			}
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.BaseURL, "/")+path, r)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	return req, nil
}

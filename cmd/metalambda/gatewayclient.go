package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metalambda/metalambda/internal/gatewayapi"
	"github.com/metalambda/metalambda/internal/httpapi"
)

// gatewayClient is the gateway's API (gatewayapi.Client) for one namespace, with
// errors that say which gateway they came from.
type gatewayClient struct {
	base      string // the gateway's URL, without a trailing slash
	source    string // where base came from, for error messages
	namespace string
	api       *gatewayapi.Client
}

func newGatewayClient(base, source, namespace string, httpc *http.Client) *gatewayClient {
	return &gatewayClient{base: base, source: source, namespace: namespace, api: &gatewayapi.Client{BaseURL: base, HTTP: httpc}}
}

// explainFailure names the gateway in a failure to reach it, and says that an answer
// that is not the gateway's error shape (a proxy's page, say) came from the gateway.
func (c *gatewayClient) explainFailure(err error) error {
	var api *httpapi.Error
	if errors.As(err, &api) {
		if api.Code == "http_"+strconv.Itoa(api.Status) {
			api.Message = "the gateway " + api.Message
		}
		return api
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		// net/url's "Get \"http://...\":" prefix says what this message says already.
		return fmt.Errorf("cannot reach the gateway at %s (%s): %w", c.base, c.source, ue.Err)
	}
	return err
}

// put creates or replaces a function from body (a gatewayapi.FunctionSpec, or an
// object with a spec); created tells which.
func (c *gatewayClient) put(ctx context.Context, name string, body any) (*unstructured.Unstructured, bool, error) {
	obj, created, err := c.api.Put(ctx, c.namespace, name, body)
	return obj, created, c.explainFailure(err)
}

func (c *gatewayClient) get(ctx context.Context, name string) (*unstructured.Unstructured, error) {
	obj, err := c.api.Get(ctx, c.namespace, name)
	return obj, c.explainFailure(err)
}

func (c *gatewayClient) list(ctx context.Context) ([]unstructured.Unstructured, error) {
	items, err := c.api.List(ctx, c.namespace)
	return items, c.explainFailure(err)
}

func (c *gatewayClient) delete(ctx context.Context, name string) error {
	return c.explainFailure(c.api.Delete(ctx, c.namespace, name))
}

func (c *gatewayClient) invoke(ctx context.Context, name string, request []byte) (*gatewayapi.InvokeResult, error) {
	res, err := c.api.Invoke(ctx, c.namespace, name, json.RawMessage(request))
	return res, c.explainFailure(err)
}

// invocations returns the function's recorded calls, newest first, and whether its
// history is on.
func (c *gatewayClient) invocations(ctx context.Context, name string) ([]gatewayapi.Invocation, bool, error) {
	list, err := c.api.Invocations(ctx, c.namespace, name)
	return list.Items, list.Enabled, c.explainFailure(err)
}

// revisions lists the function's revisions, newest first.
func (c *gatewayClient) revisions(ctx context.Context, name string) ([]gatewayapi.Revision, error) {
	list, err := c.api.Revisions(ctx, c.namespace, name)
	return list.Items, c.explainFailure(err)
}

// rollout asks for action on the function's rollout and returns the Function as
// written.
func (c *gatewayClient) rollout(ctx context.Context, name, action string) (*unstructured.Unstructured, error) {
	obj, err := c.api.Rollout(ctx, c.namespace, name, action)
	return obj, c.explainFailure(err)
}

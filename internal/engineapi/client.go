package engineapi

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
	"strings"

	"github.com/metalambda/metalambda/internal/httpapi"
)

// Errors the client's Error matches with errors.Is, by HTTP status.
var (
	ErrUnauthorized = errors.New("unauthorized")
	ErrForbidden    = errors.New("forbidden")
	ErrNotFound     = errors.New("not found")
)

// Error is an error answer of the API. errors.Is(err, ErrUnauthorized) holds for a
// 401, ErrForbidden for a 403 and ErrNotFound for a 404.
type Error struct {
	Status  int
	Code    string
	Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("engine API: %d %s: %s", e.Status, e.Code, e.Message)
}

// Is matches the sentinel errors by status.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrUnauthorized:
		return e.Status == http.StatusUnauthorized
	case ErrForbidden:
		return e.Status == http.StatusForbidden
	case ErrNotFound:
		return e.Status == http.StatusNotFound
	}
	return false
}

// Client calls the engine's API. BaseURL is the engine's API address, e.g.
// "http://127.0.0.1:9095"; HTTP nil means http.DefaultClient.
type Client struct {
	BaseURL string
	HTTP    *http.Client
}

// Controllers lists the controllers the token's user may get.
func (c *Client) Controllers(ctx context.Context, token string) (*ControllerList, error) {
	var out ControllerList
	return &out, c.get(ctx, token, "/api/v1/controllers", nil, &out)
}

// ControllersIn lists the controllers the token's user may get in namespace: the
// namespaced controllers there, when the user may list their kind in it ("" lists
// every controller, as Controllers).
func (c *Client) ControllersIn(ctx context.Context, token, namespace string) (*ControllerList, error) {
	if namespace == "" {
		return c.Controllers(ctx, token)
	}
	var out ControllerList
	return &out, c.get(ctx, token, "/api/v1/namespaces/"+url.PathEscape(namespace)+"/controllers", nil, &out)
}

// ControllerPath is the API path of the controller ref names:
// /api/v1/controllers/KIND/NAME, or /api/v1/namespaces/NS/controllers/KIND/NAME for a
// namespaced one.
func ControllerPath(ref ControllerRef) string {
	p := "/api/v1/controllers/" + url.PathEscape(ref.Kind) + "/" + url.PathEscape(ref.Name)
	if ref.Namespace != "" {
		p = "/api/v1/namespaces/" + url.PathEscape(ref.Namespace) + "/controllers/" + url.PathEscape(ref.Kind) + "/" + url.PathEscape(ref.Name)
	}
	return p
}

// Controller returns the summary of one controller the token's user may get.
func (c *Client) Controller(ctx context.Context, token string, ref ControllerRef) (*ControllerSummary, error) {
	var out ControllerSummary
	return &out, c.get(ctx, token, ControllerPath(ref), nil, &out)
}

// ControllerParents lists the parents of one controller that the token's user may get.
func (c *Client) ControllerParents(ctx context.Context, token string, ref ControllerRef) (*ParentList, error) {
	var out ParentList
	return &out, c.get(ctx, token, ControllerPath(ref)+"/parents", nil, &out)
}

// NamespacedParent returns one parent (in the controller's namespace) of a
// namespaced controller, with its children.
func (c *Client) NamespacedParent(ctx context.Context, token string, ref ControllerRef, parent string) (*ParentDetail, error) {
	var out ParentDetail
	return &out, c.get(ctx, token, ControllerPath(ref)+"/parents/"+url.PathEscape(parent), nil, &out)
}

// SyncController is Sync of any controller, a namespaced one included (whose parents
// are in its namespace: req.Namespace may be left empty).
func (c *Client) SyncController(ctx context.Context, token string, ref ControllerRef, req SyncRequest) (*SyncResult, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("engine API: %w", err)
	}
	var out SyncResult
	return &out, c.do(ctx, http.MethodPost, token, ControllerPath(ref)+"/sync", body, &out)
}

// HookCalls lists recorded hook calls, newest first, that the token's user may see.
func (c *Client) HookCalls(ctx context.Context, token string, q HookCallQuery) (*HookCallList, error) {
	v := url.Values{}
	set := func(k, val string) {
		if val != "" {
			v.Set(k, val)
		}
	}
	set("controller", q.Controller)
	set("namespace", q.Namespace)
	set("parent", q.Parent)
	if q.Since > 0 {
		v.Set("since", strconv.FormatUint(q.Since, 10))
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	var out HookCallList
	return &out, c.get(ctx, token, "/api/v1/hookcalls", v, &out)
}

// Parent returns one parent of a controller with its children. kind is the
// controller's kind (CompositeController or DecoratorController), name its name;
// namespace is the parent's namespace, "" or "-" for a cluster-scoped parent.
func (c *Client) Parent(ctx context.Context, token, kind, name, namespace, parent string) (*ParentDetail, error) {
	if namespace == "" {
		namespace = "-"
	}
	path := "/api/v1/parents/" + strings.Join([]string{
		url.PathEscape(kind), url.PathEscape(name), url.PathEscape(namespace), url.PathEscape(parent),
	}, "/")
	var out ParentDetail
	return &out, c.get(ctx, token, path, nil, &out)
}

// Sync queues one parent of a controller, or all of them (req.All), for a sync now.
// kind is the controller's kind (CompositeController or DecoratorController), name
// its name. The token's user needs update on the parents.
func (c *Client) Sync(ctx context.Context, token, kind, name string, req SyncRequest) (*SyncResult, error) {
	return c.SyncController(ctx, token, ControllerRef{Kind: kind, Name: name}, req)
}

func (c *Client) get(ctx context.Context, token, path string, query url.Values, out any) error {
	if len(query) > 0 {
		path += "?" + query.Encode()
	}
	return c.do(ctx, http.MethodGet, token, path, nil, out)
}

// do sends method path with body (JSON, nil for none) and decodes a 200's body into
// out.
func (c *Client) do(ctx context.Context, method, token, path string, body []byte, out any) error {
	var reader io.Reader
	if body != nil {
		reader = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.BaseURL, "/")+path, reader)
	if err != nil {
		return fmt.Errorf("engine API: %w", err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	httpc := c.HTTP
	if httpc == nil {
		httpc = http.DefaultClient
	}
	resp, err := httpc.Do(req)
	if err != nil {
		return fmt.Errorf("engine API: %w", err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("engine API: reading %s %s: %w", method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return errorFrom(resp.StatusCode, answer)
	}
	if err := json.Unmarshal(answer, out); err != nil {
		return fmt.Errorf("engine API: decoding %s %s: %w", method, path, err)
	}
	return nil
}

// errorFrom reads the API's error shape, or keeps the start of a body that is not it.
func errorFrom(status int, body []byte) *Error {
	var eb httpapi.Error
	if json.Unmarshal(body, &eb) == nil && eb.Code != "" {
		return &Error{Status: status, Code: eb.Code, Message: eb.Message}
	}
	msg := strings.TrimSpace(string(body))
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	return &Error{Status: status, Code: strings.ToLower(strings.ReplaceAll(http.StatusText(status), " ", "_")), Message: msg}
}

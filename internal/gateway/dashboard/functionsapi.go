package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"

	"github.com/go-chi/chi/v5"

	"github.com/metalambda/metalambda/internal/httpapi"
)

// The Functions pages act through the gateway's management API (Options.FunctionsAPI),
// called in process with the session's token: what they do is checked exactly as the
// API checks it (RBAC through SubjectAccessReview, compile errors with their position)
// and writes are made as the user.

// functionsPath is the API path of a namespace's functions, with more segments.
func functionsPath(namespace string, segments ...string) string {
	p := "/v1/namespaces/" + url.PathEscape(namespace) + "/functions"
	for _, s := range segments {
		p += "/" + url.PathEscape(s)
	}
	return p
}

// callAPI sends one request to the gateway's API as the session's user and decodes a
// success into out (when out is not nil); an error answer is an *httpapi.Error.
func (d *Dashboard) callAPI(r *http.Request, method, path string, body, out any) error {
	if d.opts.FunctionsAPI == nil {
		return &httpapi.Error{Status: http.StatusServiceUnavailable, Code: "no_api", Message: "this dashboard has no functions API"}
	}
	var data []byte
	if body != nil {
		var err error
		if data, err = json.Marshal(body); err != nil {
			return err
		}
	}
	// The API's router must route the request afresh, not as a part of the page's
	// route: the page's routing context is left out.
	ctx := context.WithValue(r.Context(), chi.RouteCtxKey, (*chi.Context)(nil))
	req, err := http.NewRequestWithContext(ctx, method, path, bytes.NewReader(data))
	if err != nil {
		return err
	}
	req.RemoteAddr = r.RemoteAddr // the API limits failed logins per client
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+SessionFrom(r.Context()).Token)
	rec := &recorder{header: http.Header{}, status: http.StatusOK}
	d.opts.FunctionsAPI.ServeHTTP(rec, req)
	if rec.status >= 400 {
		return httpapi.ErrorFrom(rec.status, rec.body.Bytes())
	}
	if out == nil || rec.status == http.StatusNoContent {
		return nil
	}
	return json.Unmarshal(rec.body.Bytes(), out)
}

// recorder is the response of an in-process API call.
type recorder struct {
	header http.Header
	status int
	wrote  bool
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if !r.wrote {
		r.status, r.wrote = status, true
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	r.wrote = true
	return r.body.Write(p)
}

package dashboard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metalambda/metalambda/internal/gateway/egress"
)

// maxTryBody bounds the answer "try it" shows.
const maxTryBody = 64 << 10

// PythonLambdaRow is one PythonLambda.
type PythonLambdaRow struct {
	Namespace, Name, Host, URL string
	Replicas, ReadyReplicas    int64
	Ready                      Condition
}

// PythonLambdasPage is what the PythonLambdas page shows.
type PythonLambdasPage struct {
	Lambdas []PythonLambdaRow
	// TryIt is false when the gateway does not know the ingress address.
	TryIt bool
}

func (d *Dashboard) pythonLambdas() view {
	return view{page: "pythonlambdas.html", title: "PythonLambdas", nav: "pythonlambdas", load: d.loadPythonLambdas}
}

func (d *Dashboard) loadPythonLambdas(r *http.Request) (any, error) {
	items, err := list(r.Context(), SessionFrom(r.Context()).Dynamic, pythonLambdas)
	if err != nil {
		return nil, err
	}
	page := PythonLambdasPage{TryIt: d.opts.IngressAddress != ""}
	for i := range items {
		page.Lambdas = append(page.Lambdas, pythonLambdaRow(&items[i]))
	}
	return page, nil
}

func pythonLambdaRow(u *unstructured.Unstructured) PythonLambdaRow {
	str := func(path ...string) string { s, _, _ := unstructured.NestedString(u.Object, path...); return s }
	num := func(path ...string) int64 { n, _, _ := unstructured.NestedInt64(u.Object, path...); return n }
	return PythonLambdaRow{
		Namespace: u.GetNamespace(), Name: u.GetName(), Host: str("spec", "host"), URL: str("status", "url"),
		Replicas: num("status", "replicas"), ReadyReplicas: num("status", "readyReplicas"),
		Ready: condition(conditions(u), "Ready"),
	}
}

// TryResult is the answer of a "try it" call.
type TryResult struct {
	Lambda     string
	Request    string
	Status     string
	Body       string
	DurationMS float64
	Truncated  bool
	// Location is where a redirect answer points: "try it" does not follow it.
	Location string
	Error    string
	// code is the status the dashboard answers with, to a request that is not htmx's.
	code int
}

// tryTimeout bounds a "try it" call, the reading of the answer included.
const tryTimeout = 15 * time.Second

// tryClient sends "try it" requests: to the ingress (at ingressAddress) alone, never
// to another loopback, link-local or denied destination, and following no redirect,
// so that a PythonLambda's answer cannot send the user's request elsewhere.
func tryClient(ingressAddress string, deny []egress.Destination) (*http.Client, error) {
	return egress.New(egress.Policy{Purpose: `"try it"`, Allow: []string{ingressAddress}, Deny: deny, Timeout: tryTimeout})
}

// tryPythonLambda calls a PythonLambda through the ingress with its host, as the user
// asked for it: the user must be allowed to get the PythonLambda.
func (d *Dashboard) tryPythonLambda(w http.ResponseWriter, r *http.Request) {
	s := SessionFrom(r.Context())
	ns, name := chi.URLParam(r, "namespace"), chi.URLParam(r, "name")
	u, err := s.Dynamic.Resource(pythonLambdas).Namespace(ns).Get(r.Context(), name, metav1.GetOptions{})
	if err != nil {
		d.fail(w, r, err)
		return
	}
	res := TryResult{Lambda: ns + "/" + name, code: http.StatusOK}
	host, _, _ := unstructured.NestedString(u.Object, "spec", "host")
	path := r.PostFormValue("path")
	switch {
	case d.try == nil:
		res.Error, res.code = "The gateway does not know the ingress address (--ingress-address): \"try it\" is off.", http.StatusServiceUnavailable
	case host == "":
		res.Error, res.code = "This PythonLambda has no spec.host: the ingress does not route to it.", http.StatusUnprocessableEntity
	case !strings.HasPrefix(path, "/"):
		res.Error, res.code = fmt.Sprintf("The path %q must start with /, e.g. /?name=Martin.", path), http.StatusBadRequest
	default:
		res = d.callThroughIngress(r.Context(), res, host, path, r.PostFormValue("body"))
	}
	// htmx swaps only 2xx answers: to htmx, the fragment says what went wrong.
	status := res.code
	if isHTMX(r) {
		status = http.StatusOK
	}
	d.execute(w, status, "pythonlambdas.html", "try-result", res)
}

// callThroughIngress sends GET (or POST with body) http://host/path to the ingress.
// The PythonLambda's answer is shown as it is: a redirect is not followed.
func (d *Dashboard) callThroughIngress(ctx context.Context, res TryResult, host, path, body string) TryResult {
	method, reader := http.MethodGet, io.Reader(nil)
	if body != "" {
		method, reader = http.MethodPost, strings.NewReader(body)
	}
	res.Request = method + " http://" + host + path
	req, err := http.NewRequestWithContext(ctx, method, "http://"+d.opts.IngressAddress+path, reader)
	if err != nil {
		res.Error, res.code = err.Error(), http.StatusBadRequest
		return res
	}
	req.Host = host
	start := d.opts.Now()
	resp, err := d.try.Do(req)
	if err != nil {
		res.Error, res.code = callError(err), http.StatusBadGateway
		return res
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxTryBody+1))
	res.DurationMS = float64(d.opts.Now().Sub(start).Microseconds()) / 1000
	res.Status = resp.Status
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		res.Location = resp.Header.Get("Location")
	}
	if len(data) > maxTryBody {
		data, res.Truncated = data[:maxTryBody], true
	}
	res.Body = string(data)
	if err != nil {
		res.Error, res.code = "reading the answer: "+err.Error(), http.StatusBadGateway
	}
	return res
}

// callError says why calling the ingress failed: a refused destination by itself.
func callError(err error) string {
	var refused *egress.RefusedError
	if errors.As(err, &refused) {
		return "\"try it\" did not call the ingress: " + refused.Error() + "."
	}
	return "calling the ingress: " + err.Error()
}

package dashboard

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
	Error      string
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
	res := TryResult{Lambda: ns + "/" + name}
	host, _, _ := unstructured.NestedString(u.Object, "spec", "host")
	path := r.PostFormValue("path")
	switch {
	case d.opts.IngressAddress == "":
		res.Error = "The gateway does not know the ingress address (--ingress-address): \"try it\" is off."
	case host == "":
		res.Error = "This PythonLambda has no spec.host: the ingress does not route to it."
	case !strings.HasPrefix(path, "/"):
		res.Error = fmt.Sprintf("The path %q must start with /, e.g. /?name=Martin.", path)
	default:
		res = d.callThroughIngress(r.Context(), res, host, path, r.PostFormValue("body"))
	}
	d.execute(w, http.StatusOK, "pythonlambdas.html", "try-result", res)
}

// callThroughIngress sends GET (or POST with body) http://host/path to the ingress.
func (d *Dashboard) callThroughIngress(ctx context.Context, res TryResult, host, path, body string) TryResult {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	method, reader := http.MethodGet, io.Reader(nil)
	if body != "" {
		method, reader = http.MethodPost, strings.NewReader(body)
	}
	res.Request = method + " http://" + host + path
	req, err := http.NewRequestWithContext(ctx, method, "http://"+d.opts.IngressAddress+path, reader)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	req.Host = host
	start := d.opts.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		res.Error = "calling the ingress: " + err.Error()
		return res
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxTryBody+1))
	res.DurationMS = float64(d.opts.Now().Sub(start).Microseconds()) / 1000
	res.Status = resp.Status
	if len(data) > maxTryBody {
		data, res.Truncated = data[:maxTryBody], true
	}
	res.Body = string(data)
	if err != nil {
		res.Error = "reading the answer: " + err.Error()
	}
	return res
}

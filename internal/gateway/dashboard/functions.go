package dashboard

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metalambda/metalambda/internal/gateway/starter"
	"github.com/metalambda/metalambda/internal/gatewayapi"
	"github.com/metalambda/metalambda/internal/httpapi"
)

// The Functions pages: the list, and one page per function (or a new one) with the
// code editor, env and timeout, the recorded calls (live), a test call and a replay of
// the unsaved source against the recorded calls.

// FunctionList is what the list page shows: the Functions of Namespace, or when it is
// empty those the user may see (see visibleFunctions).
type FunctionList struct {
	Namespace string
	Functions []FunctionRow
}

// functions is the Functions list page.
func (d *Dashboard) functions() view {
	return view{page: "functions.html", title: "Functions", nav: "functions", load: d.loadFunctions}
}

func (d *Dashboard) loadFunctions(r *http.Request) (any, error) {
	out := FunctionList{Namespace: r.URL.Query().Get("namespace")}
	var items []unstructured.Unstructured
	var err error
	if out.Namespace != "" {
		items, err = d.namespaceFunctions(r, out.Namespace)
	} else {
		items, err = d.visibleFunctions(r, d.controllerNamespaces(r)...)
	}
	if err != nil {
		return nil, err
	}
	for i := range items {
		out.Functions = append(out.Functions, d.functionRow(&items[i]))
	}
	return out, nil
}

// namespaceFunctions lists the Functions of namespace as the session's user.
func (d *Dashboard) namespaceFunctions(r *http.Request, namespace string) ([]unstructured.Unstructured, error) {
	if err := httpapi.CheckNames(namespace, ""); err != nil {
		return nil, notFound("%s", err.Message)
	}
	l, err := SessionFrom(r.Context()).Dynamic.Resource(functionsResource).Namespace(namespace).List(r.Context(), metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	sort.Slice(l.Items, func(i, j int) bool { return l.Items[i].GetName() < l.Items[j].GetName() })
	return l.Items, nil
}

// FunctionForm is what the editor edits: the fields a user sets.
type FunctionForm struct {
	Namespace, Name, Runtime, Source string
	// Timeout is the timeoutSeconds field as typed; empty means the default (10).
	Timeout string
	Env     []EnvVar
}

// EnvVar is one row of the env table.
type EnvVar struct{ Name, Value string }

// FunctionPage is what the function page shows.
type FunctionPage struct {
	New  bool
	Form FunctionForm
	// Language is the editor's: javascript, python, or jsonnet (which the editor
	// highlights as JavaScript: it has no Jsonnet mode).
	Language      string
	Runtimes      []string
	Ready         Condition
	URL           string
	History       History
	TestRequest   string
	SampleRequest string
	ReplayLimit   int
	// The outcome of what was just posted, if anything.
	Save          *SaveResult
	Test          *TestResult
	Replay        *ReplayView
	RolloutResult *RolloutOutcome
	// Rollout is the rollout panel (live).
	Rollout RolloutPanel
}

// Problem is an error of the source at a position (1-based; 0 when unknown).
type Problem struct {
	Line, Column int
	Message      string
}

// SaveResult is the outcome of a save: a message, or problems.
type SaveResult struct {
	Saved    bool
	Message  string
	Problems []Problem
}

// History is the function's recorded calls, newest first.
type History struct {
	gatewayapi.InvocationList
	// Error says why the calls are not shown (the verb invoke missing, say).
	Error string
}

// TestResult is the outcome of a test call.
type TestResult struct {
	OK bool
	gatewayapi.InvokeResult
	Error string
}

// ReplayView is the outcome of a replay.
type ReplayView struct {
	Items   []ReplayedCall
	Changed int
	Enabled bool
	// Problems are the candidate's compile errors; Error another failure.
	Problems []Problem
	Error    string
}

// defaultReplayLimit is how many recorded calls the replay form offers to run.
const defaultReplayLimit = 10

// functionView is the page of one function; its live region is its Ready condition
// and its recorded calls.
func (d *Dashboard) functionView() view {
	return view{page: "function.html", title: "Function", nav: "functions", load: d.loadFunction}
}

func (d *Dashboard) loadFunction(r *http.Request) (any, error) {
	ns, name := chi.URLParam(r, "namespace"), chi.URLParam(r, "name")
	u, err := SessionFrom(r.Context()).Dynamic.Resource(functionsResource).Namespace(ns).Get(r.Context(), name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	p := newFunctionPage(formOf(u))
	p.Ready = condition(conditions(u), "Ready")
	p.URL, _, _ = unstructured.NestedString(u.Object, "status", "url")
	p.Rollout = rolloutPanel(u)
	p.History = d.history(r, ns, name)
	if len(p.History.Items) > 0 {
		p.TestRequest = indentJSON(p.History.Items[0].Request)
	}
	return p, nil
}

func newFunctionPage(form FunctionForm) *FunctionPage {
	sample := string(starter.SampleRequest())
	return &FunctionPage{Form: form, Language: form.Runtime, Runtimes: starter.Runtimes(),
		TestRequest: sample, SampleRequest: sample, ReplayLimit: defaultReplayLimit}
}

// formOf reads a Function into the editor's fields.
func formOf(u *unstructured.Unstructured) FunctionForm {
	f := FunctionForm{Namespace: u.GetNamespace(), Name: u.GetName()}
	f.Runtime, _, _ = unstructured.NestedString(u.Object, "spec", "runtime")
	f.Source, _, _ = unstructured.NestedString(u.Object, "spec", "source")
	if t, ok, _ := unstructured.NestedInt64(u.Object, "spec", "timeoutSeconds"); ok && t > 0 {
		f.Timeout = strconv.FormatInt(t, 10)
	}
	env, _, _ := unstructured.NestedStringMap(u.Object, "spec", "env")
	for k, v := range env {
		f.Env = append(f.Env, EnvVar{Name: k, Value: v})
	}
	sort.Slice(f.Env, func(i, j int) bool { return f.Env[i].Name < f.Env[j].Name })
	return f
}

// history reads the recorded calls; a failure is said in History.Error.
func (d *Dashboard) history(r *http.Request, ns, name string) History {
	var h History
	c, ctx, err := d.api(r)
	if err == nil {
		var list *gatewayapi.InvocationList
		list, err = c.Invocations(ctx, ns, name)
		h.InvocationList = *list
	}
	if err != nil {
		h.Error = err.Error()
	}
	return h
}

// newFunctionPage serves the editor of a new function, with the starter hook of the
// runtime asked for (JavaScript by default), as `metalambda fn init` writes it.
func (d *Dashboard) newFunction(w http.ResponseWriter, r *http.Request) {
	rt := r.URL.Query().Get("runtime")
	if rt == "" {
		rt = "javascript"
	}
	source, err := starter.Hook(rt)
	if err != nil {
		d.render(w, r, http.StatusBadRequest, "error.html", "Bad request", "functions", errorPage{Status: http.StatusBadRequest, Message: err.Error()})
		return
	}
	ns := r.URL.Query().Get("namespace")
	if ns == "" {
		s := SessionFrom(r.Context())
		ns = defaultNamespace(s, mayCreateFunctions(r.Context(), s, "default"))
	}
	p := newFunctionPage(FunctionForm{Namespace: ns, Name: r.URL.Query().Get("name"), Runtime: rt, Source: string(source)})
	p.New = true
	d.render(w, r, http.StatusOK, "function.html", "New function", "functions", p)
}

// createFunction creates the function the form describes and goes to its page.
func (d *Dashboard) createFunction(w http.ResponseWriter, r *http.Request) {
	form, problems := readFunctionForm(r)
	p := newFunctionPage(form)
	p.New = true
	if len(problems) == 0 {
		spec := map[string]any{}
		form.apply(spec)
		body := map[string]any{"metadata": map[string]any{"name": form.Name}, "spec": spec}
		err := d.callAPI(r, http.MethodPost, functionsPath(form.Namespace), body, nil)
		if err == nil {
			to := Prefix + "/functions/" + form.Namespace + "/" + form.Name
			if isHTMX(r) {
				w.Header().Set("HX-Redirect", to)
				w.WriteHeader(http.StatusNoContent)
				return
			}
			http.Redirect(w, r, to, http.StatusSeeOther)
			return
		}
		problems = problemsOf(err)
	}
	p.Save = &SaveResult{Problems: problems}
	d.answer(w, r, http.StatusUnprocessableEntity, p, "save-result")
}

// saveFunction replaces the function's runtime, source, timeout and env, keeping the
// rest of its spec (handler, history, network) as stored.
func (d *Dashboard) saveFunction(w http.ResponseWriter, r *http.Request) {
	form, problems := readFunctionForm(r)
	form.Namespace, form.Name = chi.URLParam(r, "namespace"), chi.URLParam(r, "name")
	p := newFunctionPage(form)
	status := http.StatusOK
	if len(problems) == 0 {
		problems = problemsOf(d.update(r, form))
	}
	p.Save = &SaveResult{Saved: len(problems) == 0, Problems: problems}
	if p.Save.Saved {
		p.Save.Message = "Saved. The gateway serves the new version once it is loaded (Ready turns True)."
	} else {
		status = http.StatusUnprocessableEntity
	}
	d.answerWithFunction(w, r, status, p, "save-result")
}

func (d *Dashboard) update(r *http.Request, form FunctionForm) error {
	u, err := SessionFrom(r.Context()).Dynamic.Resource(functionsResource).Namespace(form.Namespace).Get(r.Context(), form.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	spec, _, _ := unstructured.NestedMap(u.Object, "spec")
	if spec == nil {
		spec = map[string]any{}
	}
	form.apply(spec)
	return d.callAPI(r, http.MethodPut, functionsPath(form.Namespace, form.Name), map[string]any{"spec": spec}, nil)
}

// apply writes the form's fields into a spec.
func (f FunctionForm) apply(spec map[string]any) {
	spec["runtime"], spec["source"] = f.Runtime, f.Source
	delete(spec, "timeoutSeconds")
	if t, err := strconv.Atoi(f.Timeout); err == nil {
		spec["timeoutSeconds"] = t
	}
	delete(spec, "env")
	if env := f.envMap(); len(env) > 0 {
		spec["env"] = env
	}
}

func (f FunctionForm) envMap() map[string]string {
	env := map[string]string{}
	for _, e := range f.Env {
		env[e.Name] = e.Value
	}
	return env
}

// testFunction calls the stored function with the request typed in the test form.
func (d *Dashboard) testFunction(w http.ResponseWriter, r *http.Request) {
	ns, name := chi.URLParam(r, "namespace"), chi.URLParam(r, "name")
	request := strings.TrimSpace(r.PostFormValue("request"))
	res := &TestResult{}
	if !json.Valid([]byte(request)) {
		res.Error = "The test request is not JSON."
	} else if err := d.invoke(r, ns, name, json.RawMessage(request), res); err != nil {
		res.Error = err.Error()
		var ae *httpapi.Error
		if errors.As(err, &ae) {
			res.Logs = ae.Logs
		}
	} else {
		res.OK = true
	}
	p := newFunctionPage(FunctionForm{Namespace: ns, Name: name})
	p.TestRequest, p.Test = request, res
	d.answerWithFunction(w, r, http.StatusOK, p, "test-result")
}

// replayFunction runs the form's unsaved source against the function's last recorded
// calls.
func (d *Dashboard) replayFunction(w http.ResponseWriter, r *http.Request) {
	form, problems := readFunctionForm(r)
	form.Namespace, form.Name = chi.URLParam(r, "namespace"), chi.URLParam(r, "name")
	p := newFunctionPage(form)
	p.Replay = &ReplayView{}
	limit, err := strconv.Atoi(r.PostFormValue("limit"))
	if err != nil || limit < 1 {
		problems = append(problems, Problem{Message: fmt.Sprintf("The number of calls to replay must be a whole number of at least 1, not %q.", r.PostFormValue("limit"))})
	}
	p.ReplayLimit = limit
	if len(problems) == 0 {
		body := gatewayapi.ReplayRequest{Runtime: form.Runtime, Source: form.Source, Env: form.envMap(), Limit: limit}
		if t, err := strconv.Atoi(form.Timeout); err == nil {
			body.TimeoutSeconds = int32(t)
		}
		problems = problemsOf(d.replay(r, form.Namespace, form.Name, body, p.Replay))
	}
	p.Replay.Problems = problems
	d.answerWithFunction(w, r, http.StatusOK, p, "replay-result")
}

// invoke makes a test call of the function into res.
func (d *Dashboard) invoke(r *http.Request, ns, name string, request json.RawMessage, res *TestResult) error {
	c, ctx, err := d.api(r)
	if err != nil {
		return err
	}
	out, err := c.Invoke(ctx, ns, name, request)
	res.InvokeResult = *out
	return err
}

// replay runs the candidate body against the function's recorded calls into v.
func (d *Dashboard) replay(r *http.Request, ns, name string, body gatewayapi.ReplayRequest, v *ReplayView) error {
	c, ctx, err := d.api(r)
	if err != nil {
		return err
	}
	out, err := c.Replay(ctx, ns, name, body)
	v.Items, v.Changed, v.Enabled = out.Items, out.Changed, out.Enabled
	return err
}

// readFunctionForm reads the editor's form; the problems are those of the fields
// themselves (the API checks the rest).
func readFunctionForm(r *http.Request) (FunctionForm, []Problem) {
	f := FunctionForm{
		Namespace: strings.TrimSpace(r.PostFormValue("namespace")), Name: strings.TrimSpace(r.PostFormValue("name")),
		Runtime: r.PostFormValue("runtime"), Source: r.PostFormValue("source"), Timeout: strings.TrimSpace(r.PostFormValue("timeout")),
	}
	var problems []Problem
	if f.Timeout != "" {
		if t, err := strconv.Atoi(f.Timeout); err != nil || t < 1 || t > 300 {
			problems = append(problems, Problem{Message: fmt.Sprintf("The timeout must be a whole number of seconds from 1 to 300, not %q.", f.Timeout)})
		}
	}
	names, values := r.PostForm["env-name"], r.PostForm["env-value"]
	seen := map[string]bool{}
	for i, name := range names {
		name = strings.TrimSpace(name)
		value := ""
		if i < len(values) {
			value = values[i]
		}
		switch {
		case name == "" && value == "":
			continue
		case name == "":
			problems = append(problems, Problem{Message: fmt.Sprintf("Env row %d has a value but no name.", i+1)})
			continue
		case seen[name]:
			problems = append(problems, Problem{Message: fmt.Sprintf("Env variable %s is given twice.", name)})
			continue
		}
		seen[name] = true
		f.Env = append(f.Env, EnvVar{Name: name, Value: value})
	}
	return f, problems
}

// problemsOf turns an API error into problems: a compile error at its position, any
// other error without one; nil for nil.
func problemsOf(err error) []Problem {
	if err == nil {
		return nil
	}
	var ae *httpapi.Error
	if errors.As(err, &ae) {
		return []Problem{{Line: ae.Line, Column: ae.Column, Message: ae.Message}}
	}
	return []Problem{{Message: err.Error()}}
}

// answerWithFunction answers a post on a function's page: the page's result fragment to
// htmx, the whole page (its function and calls read again) to a plain form post.
func (d *Dashboard) answerWithFunction(w http.ResponseWriter, r *http.Request, status int, p *FunctionPage, fragment string) {
	if !isHTMX(r) {
		if loaded, err := d.loadFunction(r); err == nil {
			full := loaded.(*FunctionPage)
			full.Save, full.Test, full.Replay, full.RolloutResult = p.Save, p.Test, p.Replay, p.RolloutResult
			if p.Form.Source != "" {
				full.Form = p.Form
			}
			if p.Test != nil {
				full.TestRequest = p.TestRequest
			}
			full.ReplayLimit = p.ReplayLimit
			p = full
		}
	}
	d.answer(w, r, status, p, fragment)
}

// answer renders the fragment to htmx and the whole page, with status, otherwise.
func (d *Dashboard) answer(w http.ResponseWriter, r *http.Request, status int, p *FunctionPage, fragment string) {
	title := p.Form.Name
	if p.New {
		title = "New function"
	}
	if isHTMX(r) {
		// htmx swaps only 2xx answers: the fragment says what went wrong.
		d.execute(w, http.StatusOK, "function.html", fragment, Page{Title: title, Nav: "functions", Session: SessionFrom(r.Context()), Data: p, Now: d.opts.Now()})
		return
	}
	d.render(w, r, status, "function.html", title, "functions", p)
}

func isHTMX(r *http.Request) bool { return r.Header.Get("HX-Request") == "true" }

package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/pmezard/go-difflib/difflib"

	fnv1 "github.com/metalambda/metalambda/internal/apis/metalambda/v1alpha1"
	"github.com/metalambda/metalambda/internal/gateway/lambda"
	"github.com/metalambda/metalambda/internal/gatewayapi"
	"github.com/metalambda/metalambda/internal/httpapi"
)

// A replay runs a candidate version of a function, not yet saved, against the
// function's recorded calls and tells, per call, whether its answer would change: a
// regression test made of real traffic. The candidate is compiled as any function is
// (the same runtimes, sandbox and limits, the function's network), in a scratch
// compilation of its own that is closed when the replay ends; its calls are run one at
// a time, are not recorded and are not counted in the metrics.

const (
	// defaultReplayLimit is how many recorded calls a replay runs when the request
	// does not say.
	defaultReplayLimit = 10
	// replayBudget bounds a whole replay; calls left when it runs out are reported
	// as not run. It leaves the HTTP server's write timeout a margin.
	replayBudget = maxFunctionTimeout
)

// replayRequest is the body of POST .../replay, with the gateway's reading of it
// (candidate).
type replayRequest gatewayapi.ReplayRequest

// The answer of a replay, as the API's types declare it.
type (
	ReplayResult = gatewayapi.ReplayResult
	ReplayedCall = gatewayapi.ReplayedCall
	CallOutcome  = gatewayapi.CallOutcome
)

// replay serves POST .../replay.
func (g *Gateway) replay(w http.ResponseWriter, r *http.Request) {
	ns, name := chi.URLParam(r, "namespace"), chi.URLParam(r, "name")
	req, err := readReplay(r, g.opts.History)
	if err != nil {
		httpapi.WriteError(w, err)
		return
	}
	e, err := g.loaded(r.Context(), ns, name)
	if err != nil {
		httpapi.WriteError(w, err)
		return
	}
	latest := e.latest()
	spec := req.candidate(latest.fn)
	if err := g.checkSpec(&spec); err != nil {
		httpapi.WriteError(w, err)
		return
	}
	fn := toRuntime(ns, name, &spec)
	if err := g.compiler.check(fn); err != nil {
		httpapi.WriteError(w, httpapi.NewError(http.StatusUnprocessableEntity, "network_not_allowed", err.Error()))
		return
	}
	// The candidate reads the function's env sources, as the function does, if the
	// caller may read them too.
	if err := g.checkSourceAccess(r, ns, latest.sources); err != nil {
		httpapi.WriteError(w, err)
		return
	}
	fromSources, err := g.store.env.resolve(r.Context(), fn.Name, ns, latest.sources)
	if err != nil {
		httpapi.WriteError(w, httpapi.NewError(http.StatusServiceUnavailable, "env_source_unavailable", err.Error()))
		return
	}
	fn.Env = mergeEnv(fromSources, fn.Env)
	compiled, err := g.compiler.Compile(fn)
	if err != nil {
		httpapi.WriteError(w, compileError(err))
		return
	}
	defer compiled.Close()
	ctx, cancel := context.WithTimeout(r.Context(), replayBudget)
	defer cancel()
	recorded, _ := g.recorded(r, ns, name, e)
	if len(recorded) > req.Limit {
		recorded = recorded[:req.Limit]
	}
	result := ReplayResult{Items: replayCalls(ctx, compiled, recorded), Enabled: e.history.enabled()}
	for _, item := range result.Items {
		if item.Changed {
			result.Changed++
		}
	}
	httpapi.WriteJSON(w, http.StatusOK, result)
}

// limitReplays answers 429 with Retry-After when the gateway already runs as many
// replays as it may (each starts workers of its own), or the namespace half of
// them.
func (g *Gateway) limitReplays(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ns := chi.URLParam(r, "namespace")
		if !g.nsReplays.acquire(ns) {
			w.Header().Set("Retry-After", strconv.Itoa(callRetryAfter))
			httpapi.WriteError(w, httpapi.NewError(http.StatusTooManyRequests, "too_many_replays", "namespace "+strconv.Quote(ns)+" already runs "+strconv.Itoa(g.nsReplays.max)+" replays, the most one namespace may run at once on this gateway; retry in a moment"))
			return
		}
		defer g.nsReplays.release(ns)
		if !g.replays.acquire("") {
			w.Header().Set("Retry-After", strconv.Itoa(callRetryAfter))
			httpapi.WriteError(w, httpapi.NewError(http.StatusTooManyRequests, "too_many_replays", "this gateway already runs "+strconv.Itoa(g.replays.max)+" replays, its limit; retry in a moment"))
			return
		}
		defer g.replays.release("")
		next(w, r)
	}
}

func readReplay(r *http.Request, maxLimit int) (*replayRequest, error) {
	body, err := readBody(r)
	if err != nil {
		return nil, err
	}
	var req replayRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, httpapi.NewError(http.StatusBadRequest, "bad_request", "the body is not a replay request in JSON: "+err.Error())
	}
	if req.Limit == 0 {
		req.Limit = min(defaultReplayLimit, maxLimit)
	}
	if req.Limit < 1 || req.Limit > maxLimit {
		return nil, httpapi.NewError(http.StatusUnprocessableEntity, "invalid_limit", fmt.Sprintf("limit %d is not between 1 and %d, the calls this gateway keeps per function", req.Limit, maxLimit))
	}
	return &req, nil
}

// candidate is the spec a replay runs: the request's source, and its runtime, handler,
// timeout and env where it gives them, else the current function's (its handler only
// when the runtime stays). The network and the env sources (envFrom, envValueFrom)
// are always the current function's.
func (req *replayRequest) candidate(current lambda.Function) fnv1.FunctionSpec {
	spec := fnv1.FunctionSpec{Runtime: req.Runtime, Source: req.Source, Handler: req.Handler,
		TimeoutSeconds: req.TimeoutSeconds, Env: req.Env, Network: current.Network}
	if spec.Runtime == "" {
		spec.Runtime = current.Runtime
	}
	if spec.Handler == "" && spec.Runtime == current.Runtime {
		spec.Handler = current.Handler
	}
	if spec.TimeoutSeconds == 0 {
		spec.TimeoutSeconds = int32(current.Timeout / time.Second)
	}
	if spec.Env == nil {
		spec.Env = current.Env
	}
	return spec
}

// replayCalls runs c with each recorded request in turn, until ctx ends.
func replayCalls(ctx context.Context, c lambda.Compiled, recorded []Invocation) []ReplayedCall {
	items := make([]ReplayedCall, 0, len(recorded))
	for _, rec := range recorded {
		items = append(items, replayCall(ctx, c, rec))
	}
	return items
}

func replayCall(ctx context.Context, c lambda.Compiled, rec Invocation) ReplayedCall {
	item := ReplayedCall{Time: rec.Time, Source: rec.Source, Request: rec.Request, Old: CallOutcome{
		Status: rec.Status, Response: rec.Response, Error: rec.Error, Logs: rec.Logs, DurationMS: rec.DurationMS}}
	switch {
	case truncationNote(rec.Request):
		item.Error = fmt.Sprintf("not run: the request was over %d KiB, and the history keeps only the size of such a request", maxRecordedBody>>10)
		return item
	case ctx.Err() != nil:
		item.Error = fmt.Sprintf("not run: the replay's time (%s) ran out, or it was cancelled", replayBudget)
		return item
	}
	if bytes.Contains(rec.Request, []byte(strconv.Quote(redacted))) {
		item.Notes = append(item.Notes, "the recorded request has redacted values (Secret data, authorization); the candidate was given "+strconv.Quote(redacted)+" in their place, as the history shows them")
	}
	if truncationNote(rec.Response) {
		item.Notes = append(item.Notes, fmt.Sprintf("the recorded response was over %d KiB and only its size was kept: the answers are compared by size", maxRecordedBody>>10))
	}
	item.New = invokeOnce(ctx, c, rec.Request)
	item.Changed, item.Diff = compareOutcomes(item.Old, *item.New)
	return item
}

// invokeOnce runs one call and keeps its answer as the history would keep it
// (redacted, and only its size when big), so that it compares with a recorded one.
func invokeOnce(ctx context.Context, c lambda.Compiled, request json.RawMessage) *CallOutcome {
	start := time.Now()
	res, err := c.Invoke(ctx, request)
	out := &CallOutcome{Status: http.StatusOK, Response: redactJSON(truncateJSON(res.Response)), Logs: res.Logs,
		DurationMS: float64(time.Since(start).Microseconds()) / 1000}
	if err != nil {
		out.Status, out.Response, out.Error = http.StatusInternalServerError, nil, err.Error()
	}
	if errors.Is(err, lambda.ErrInvalidRequest) {
		out.Status = http.StatusBadRequest
	}
	return out
}

// truncationNote reports whether a recorded body is the note truncateJSON leaves in
// place of a big one.
func truncationNote(raw json.RawMessage) bool {
	if !bytes.Contains(raw, []byte(`"truncated"`)) {
		return false
	}
	var note map[string]any
	if json.Unmarshal(raw, &note) != nil || len(note) != 2 {
		return false
	}
	_, isSize := note["bytes"].(float64)
	return note["truncated"] == true && isSize
}

// compareOutcomes tells whether two answers differ, in status, error or response (as
// JSON values: key order and spacing aside), and if so how, as a unified diff. Logs
// and durations are not compared.
func compareOutcomes(old, cand CallOutcome) (bool, string) {
	if old.Status == cand.Status && old.Error == cand.Error && sameJSONValue(old.Response, cand.Response) {
		return false, ""
	}
	diff, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(renderOutcome(old)), B: difflib.SplitLines(renderOutcome(cand)),
		FromFile: "recorded", ToFile: "candidate", Context: 3,
	})
	if err != nil {
		diff = "the answers differ (" + err.Error() + ")"
	}
	return true, diff
}

// renderOutcome is an answer as lines to diff: its status, then its error or its
// response as indented JSON with sorted keys.
func renderOutcome(o CallOutcome) string {
	var b strings.Builder
	fmt.Fprintf(&b, "status: %d\n", o.Status)
	if o.Error != "" {
		fmt.Fprintf(&b, "error: %s\n", o.Error)
	}
	if len(o.Response) > 0 {
		b.WriteString(indentJSON(o.Response))
		b.WriteByte('\n')
	}
	return b.String()
}

// indentJSON prints a JSON value with sorted keys, two spaces per level; a body that
// is not JSON is returned as it is.
func indentJSON(raw json.RawMessage) string {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return string(raw)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return string(raw)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// sameJSONValue compares two JSON bodies as values; bodies that are not JSON compare
// as bytes.
func sameJSONValue(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return bytes.Equal(a, b)
	}
	return reflect.DeepEqual(va, vb)
}

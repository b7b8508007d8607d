package dashboard

import (
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metalambda/metalambda/internal/engineapi"
)

// Overview is what the overview page shows.
type Overview struct {
	Controllers []ControllerRow
	Functions   []FunctionRow
	// EngineError says why the engine's numbers are missing, if they are.
	EngineError string
}

// ControllerRow is one controller of the overview.
type ControllerRow struct {
	// Namespace is set for a namespaced controller, whose row comes from the engine.
	Kind, Namespace, Name string
	ServiceAccount        string
	Ready, Supported      Condition
	Parents               int
	SyncErrorsLastHour    int
	Latency               []engineapi.LatencyPoint
	// Engine is false when the engine said nothing about the controller.
	Engine       bool
	Running      bool
	EngineStatus string
}

// FunctionRow is one Function of the overview.
type FunctionRow struct {
	Namespace, Name, Runtime string
	Ready                    Condition
	Rates                    Rates
	HasRates                 bool
	// Rollout marks a rollout under way or halted.
	Rollout *RolloutBadge
}

func (d *Dashboard) overview() view {
	return view{page: "overview.html", title: "Overview", nav: "overview", load: d.loadOverview}
}

func (d *Dashboard) loadOverview(r *http.Request) (any, error) {
	ctx, s := r.Context(), SessionFrom(r.Context())
	var ov Overview
	for _, kind := range []string{engineapi.KindComposite, engineapi.KindDecorator} {
		gvr, _ := controllerResource(kind)
		items, err := list(ctx, s.Dynamic, gvr)
		if apierrors.IsForbidden(err) {
			continue // a namespace's developer: its own controllers come from the engine
		}
		if err != nil {
			return nil, err
		}
		for i := range items {
			conds := conditions(&items[i])
			ov.Controllers = append(ov.Controllers, ControllerRow{Kind: kind, Name: items[i].GetName(), Ready: condition(conds, "Ready"), Supported: condition(conds, "Supported")})
		}
	}
	ov.EngineError = d.addEngineSummaries(r, &ov)
	var namespaces []string
	for _, c := range ov.Controllers {
		namespaces = append(namespaces, c.Namespace)
	}
	fns, err := d.visibleFunctions(r, namespaces...)
	if err != nil {
		return nil, err
	}
	for i := range fns {
		ov.Functions = append(ov.Functions, d.functionRow(&fns[i]))
	}
	return ov, nil
}

// addEngineSummaries fills in what the engine knows of each controller, and adds the
// namespaced controllers it shows the user (those of the namespaces where the user
// may list them); the answer is why it could not.
func (d *Dashboard) addEngineSummaries(r *http.Request, ov *Overview) string {
	rows := ov.Controllers
	if d.engine == nil {
		return "The gateway has no engine API address: parent counts, sync errors and hook latency are not shown."
	}
	list, err := d.engine.Controllers(r.Context(), SessionFrom(r.Context()).Token)
	if err != nil {
		return err.Error()
	}
	byRef := map[engineapi.ControllerRef]engineapi.ControllerSummary{}
	for _, c := range list.Items {
		if c.Namespace != "" {
			ov.Controllers = append(ov.Controllers, namespacedRow(c))
			continue
		}
		byRef[c.ControllerRef] = c
	}
	for i := range rows {
		c, ok := byRef[engineapi.ControllerRef{Kind: rows[i].Kind, Name: rows[i].Name}]
		if !ok {
			continue
		}
		rows[i].Engine, rows[i].Running, rows[i].Parents = true, c.Running, c.Parents
		rows[i].SyncErrorsLastHour, rows[i].Latency, rows[i].EngineStatus = c.SyncErrorsLastHour, c.Latency, c.Error
	}
	return ""
}

// namespacedRow is the overview's row of a namespaced controller the engine showed.
func namespacedRow(c engineapi.ControllerSummary) ControllerRow {
	conds := summaryConditions(c)
	return ControllerRow{
		Kind: c.Kind, Namespace: c.Namespace, Name: c.Name, ServiceAccount: c.ServiceAccountName,
		Ready: condition(conds, "Ready"), Supported: condition(conds, "Supported"),
		Engine: true, Running: c.Running, Parents: c.Parents, SyncErrorsLastHour: c.SyncErrorsLastHour, Latency: c.Latency, EngineStatus: c.Error,
	}
}

func summaryConditions(c engineapi.ControllerSummary) []Condition {
	out := make([]Condition, len(c.Conditions))
	for i, cond := range c.Conditions {
		out[i] = Condition{Type: cond.Type, Status: cond.Status, Reason: cond.Reason, Message: cond.Message}
	}
	return out
}

func (d *Dashboard) functionRow(u *unstructured.Unstructured) FunctionRow {
	rt, _, _ := unstructured.NestedString(u.Object, "spec", "runtime")
	row := FunctionRow{Namespace: u.GetNamespace(), Name: u.GetName(), Runtime: rt, Ready: condition(conditions(u), "Ready"), Rollout: rolloutBadge(u)}
	if d.opts.FunctionRates != nil {
		row.Rates, row.HasRates = d.opts.FunctionRates(row.Namespace, row.Name)
	}
	return row
}

// sparkline is an SVG polyline's points for values, scaled into w×h (the largest value
// at the top); fewer than two values draw a flat line.
func sparkline(values []float64, w, h float64) string {
	if len(values) == 0 {
		return ""
	}
	if len(values) == 1 {
		values = []float64{values[0], values[0]}
	}
	maxV := 0.0
	for _, v := range values {
		maxV = max(maxV, v)
	}
	var b strings.Builder
	for i, v := range values {
		y := h / 2
		if maxV > 0 {
			y = h - v/maxV*(h-2) - 1
		}
		fmt.Fprintf(&b, "%.1f,%.1f ", float64(i)*w/float64(len(values)-1), y)
	}
	return strings.TrimSpace(b.String())
}

// LatencyChart is the overview's small chart of a controller's hook latency (p50 per
// minute), with the words a screen reader says for it.
type LatencyChart struct {
	Points              string
	Label               string
	Calls               int
	LatestMS, HighestMS float64
}

func latencyChart(points []engineapi.LatencyPoint) LatencyChart {
	if len(points) == 0 {
		return LatencyChart{Label: "no hook calls in the last hour"}
	}
	c := LatencyChart{LatestMS: points[len(points)-1].P50MS}
	values := make([]float64, len(points))
	for i, p := range points {
		values[i] = p.P50MS
		c.Calls += p.Calls
		c.HighestMS = max(c.HighestMS, p.P50MS)
	}
	c.Points = sparkline(values, 120, 28)
	c.Label = fmt.Sprintf("hook latency (median per minute) over the last hour: %d calls, latest %.1f ms, highest %.1f ms", c.Calls, c.LatestMS, c.HighestMS)
	return c
}

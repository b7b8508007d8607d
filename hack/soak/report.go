package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// Report is what a soak measured, and the targets it checks.
type Report struct {
	Config  Config
	Settled bool // every parent's last change was reflected within Config.Settle

	Faults []window
	// Requests and failures by fault kind ("none": in no window).
	Requests, Failed map[string]int
	// LambdaTarget counts the requests outside windows in which the lambda's own pod
	// was killed (its own pythonlambda fault, or the node's), and their failures.
	LambdaRequests, LambdaFailed int
	FailureSamples               []string
	// SyncErrors by fault kind, from the engines' metrics.
	SyncErrors map[string]float64
	// SyncErrorSigns are, by fault kind, the engines' hook calls that got no 200, by
	// code ("hook 503"), and their syncs that neither failed nor succeeded, by result
	// ("sync conflict": a write conflicted with the soak's writer's, and the parent
	// was synced again at once).
	SyncErrorSigns map[string]map[string]float64

	Writes, FailedWrites int
	// ChangeLatencies: every change reflected before the next one of its parent.
	ChangeP50, ChangeP99, ChangeMax time.Duration
	// LastChange: each parent's last change -> both children carry it.
	LastP99, LastMax time.Duration
	// LastAfterFault: the latest of each parent's reflection, measured from the later
	// of its last change and the end of the last fault (the 30 s target).
	LastAfterFault time.Duration
	Unreflected    int

	Lost, Duplicated, Orphaned []string

	// NoopWrites are the engines' writes during a full resync of the converged
	// parents (-1: not measured), NoopHookCalls the hook calls then.
	NoopWrites    float64
	NoopHookCalls float64
	NoopProblem   string

	// SyncErrorReasons are the SyncError events of the soak's parents, by message
	// (the parent's name taken out), most frequent first; FunctionReady is the sync
	// Function's Ready condition at the end.
	SyncErrorReasons []string
	FunctionReady    string
}

// check measures what the run left and fills the report.
func (s *soak) check(ctx context.Context, rep *Report) {
	rep.Faults = s.faults.windows()
	s.attributeRequests(rep)
	s.attributeSyncErrors(rep)
	s.parentLatencies(rep)
	s.checkChildren(ctx, rep)
	s.diagnose(ctx, rep)
	if rep.Unreflected > 0 {
		rep.NoopWrites, rep.NoopProblem = -1, "not measured: the parents did not converge"
		return
	}
	s.checkNoopWrites(ctx, rep)
}

// diagnose records why syncs failed, from the parents' events, and the sync
// Function's readiness.
func (s *soak) diagnose(ctx context.Context, rep *Report) {
	if fn, err := s.dyn.Resource(functionsGVR).Namespace(parentNS).Get(ctx, "sync", metav1.GetOptions{}); err == nil {
		conds, _, _ := unstructured.NestedSlice(fn.Object, "status", "conditions")
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == "Ready" {
				rep.FunctionReady = fmt.Sprintf("%v %v: %.300v", m["status"], m["reason"], m["message"])
			}
		}
	}
	events, err := s.kube.CoreV1().Events(parentNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	counts := map[string]int{}
	for _, ev := range events.Items {
		if ev.Reason == "SyncError" {
			msg := strings.ReplaceAll(ev.Message, ev.InvolvedObject.Name, "<parent>")
			counts[fmt.Sprintf("%.240s", msg)] += int(max(ev.Count, 1))
		}
	}
	for msg := range counts {
		rep.SyncErrorReasons = append(rep.SyncErrorReasons, msg)
	}
	slices.SortFunc(rep.SyncErrorReasons, func(a, b string) int { return counts[b] - counts[a] })
	for i, msg := range rep.SyncErrorReasons {
		rep.SyncErrorReasons[i] = fmt.Sprintf("%d× %s", counts[msg], msg)
	}
	rep.SyncErrorReasons = rep.SyncErrorReasons[:min(len(rep.SyncErrorReasons), 5)]
}

// kindsAt are the kinds of the fault windows t falls in, or "none".
func kindsAt(ws []window, t time.Time) []string {
	var kinds []string
	for _, w := range ws {
		if w.contains(t) && !slices.Contains(kinds, w.kind) {
			kinds = append(kinds, w.kind)
		}
	}
	if len(kinds) == 0 {
		return []string{"none"}
	}
	return kinds
}

func (s *soak) attributeRequests(rep *Report) {
	rep.Requests, rep.Failed = map[string]int{}, map[string]int{}
	for _, r := range s.requests.all() {
		for _, k := range kindsAt(rep.Faults, r.at) {
			rep.Requests[k]++
			if r.err != "" {
				rep.Failed[k]++
			}
		}
		if ownPodKilled(rep.Faults, r) {
			continue
		}
		rep.LambdaRequests++
		if r.err != "" {
			rep.LambdaFailed++
			if len(rep.FailureSamples) < 10 {
				rep.FailureSamples = append(rep.FailureSamples, fmt.Sprintf("%s %s [%s]: %s",
					r.at.Format("15:04:05.000"), lambdaName(r.target), strings.Join(kindsAt(rep.Faults, r.at), ","), r.err))
			}
		}
	}
}

// ownPodKilled: the request fell in a window that killed its lambda's pod.
func ownPodKilled(ws []window, r request) bool {
	for _, w := range ws {
		if w.contains(r.at) && (w.kind == faultNode || (w.kind == faultLambda && w.target == r.target)) {
			return true
		}
	}
	return false
}

func (s *soak) attributeSyncErrors(rep *Report) {
	rep.SyncErrors = map[string]float64{}
	for _, e := range s.engines.syncErrorsSeen() {
		for _, k := range kindsAt(rep.Faults, e.at) {
			rep.SyncErrors[k] += e.count
		}
	}
	rep.SyncErrorSigns = map[string]map[string]float64{}
	for _, sg := range s.engines.signsSeen() {
		for _, k := range kindsAt(rep.Faults, sg.at) {
			if rep.SyncErrorSigns[k] == nil {
				rep.SyncErrorSigns[k] = map[string]float64{}
			}
			rep.SyncErrorSigns[k][sg.what] += sg.count
		}
	}
}

func (s *soak) parentLatencies(rep *Report) {
	l := s.parents
	l.mu.Lock()
	defer l.mu.Unlock()
	rep.Writes, rep.FailedWrites = l.writes, l.failedWrites
	rep.ChangeP50, rep.ChangeP99, rep.ChangeMax = quantile(l.latencies, 0.5), quantile(l.latencies, 0.99), quantile(l.latencies, 1)
	var lastFault time.Time
	for _, w := range rep.Faults {
		if w.recovered.After(lastFault) {
			lastFault = w.recovered
		}
	}
	var last []time.Duration
	for _, p := range l.parents {
		if !p.reflected {
			rep.Unreflected++
			continue
		}
		last = append(last, p.reflectAt.Sub(p.changedAt))
		from := p.changedAt
		if lastFault.After(from) {
			from = lastFault
		}
		rep.LastAfterFault = max(rep.LastAfterFault, p.reflectAt.Sub(from))
	}
	rep.LastP99, rep.LastMax = quantile(last, 0.99), quantile(last, 1)
	rep.Lost, rep.Duplicated = slices.Clone(l.lost), slices.Clone(l.duplicated)
}

func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	sorted := slices.Clone(ds)
	slices.Sort(sorted)
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// checkChildren lists the parents and every ConfigMap of the namespace once settled:
// a child must have its parent as controller, each parent exactly two children.
func (s *soak) checkChildren(ctx context.Context, rep *Report) {
	parents, err := s.dyn.Resource(parentsGVR).Namespace(parentNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		rep.Lost = append(rep.Lost, "cannot list the parents: "+err.Error())
		return
	}
	cms, err := s.kube.CoreV1().ConfigMaps(parentNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		rep.Lost = append(rep.Lost, "cannot list the children: "+err.Error())
		return
	}
	uids := map[types.UID]string{}
	for _, p := range parents.Items {
		uids[p.GetUID()] = p.GetName()
	}
	children := map[string]int{}
	for _, cm := range cms.Items {
		if cm.Name == "kube-root-ca.crt" {
			continue
		}
		ref := metav1.GetControllerOf(&cm)
		switch {
		case ref == nil:
			rep.Orphaned = append(rep.Orphaned, cm.Name+": no controller")
		case uids[ref.UID] == "":
			rep.Orphaned = append(rep.Orphaned, cm.Name+": its parent is gone")
		default:
			children[uids[ref.UID]]++
		}
	}
	for _, p := range parents.Items {
		switch n := children[p.GetName()]; {
		case n < 2:
			rep.Lost = append(rep.Lost, fmt.Sprintf("at the end %s: %d of 2 children", p.GetName(), n))
		case n > 2:
			rep.Duplicated = append(rep.Duplicated, fmt.Sprintf("at the end %s: %d children", p.GetName(), n))
		}
	}
}

// checkNoopWrites waits until the engines' writes settle (syncs that failed during
// the faults may retry once more), then counts their writes over a full resync of
// the converged parents (ResyncPeriod and a half): any is a write that changed
// nothing.
func (s *soak) checkNoopWrites(ctx context.Context, rep *Report) {
	rep.NoopWrites = -1
	var prev float64
	var stable time.Time
	for deadline := time.Now().Add(time.Minute); ; {
		writes, _, _ := s.engines.totals(ctx)
		if writes != prev || stable.IsZero() {
			prev, stable = writes, time.Now()
		}
		if time.Since(stable) >= 5*time.Second || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	writes0, calls0, pods0 := s.engines.totals(ctx)
	time.Sleep(s.cfg.ResyncPeriod * 3 / 2)
	writes1, calls1, pods1 := s.engines.totals(ctx)
	switch {
	case pods0 != pods1:
		rep.NoopProblem = "an engine pod changed during the resync"
	case calls1-calls0 < float64(s.cfg.Parents):
		rep.NoopProblem = fmt.Sprintf("no full resync seen: %.0f hook calls for %d parents", calls1-calls0, s.cfg.Parents)
	default:
		rep.NoopWrites, rep.NoopHookCalls = writes1-writes0, calls1-calls0
	}
}

// missedGatewaySyncs ends the message of the gateway target.
const missedGatewaySyncs = "failed syncs in gateway windows"

// Missed lists the targets the run missed.
func (r *Report) Missed() []string {
	var out []string
	miss := func(ok bool, format string, args ...any) {
		if !ok {
			out = append(out, fmt.Sprintf(format, args...))
		}
	}
	for _, w := range r.Faults {
		miss(w.err == "", "fault %s %s: %s", w.kind, w.detail, w.err)
	}
	miss(len(r.Lost) == 0, "%d children lost", len(r.Lost))
	miss(len(r.Duplicated) == 0, "%d parents with duplicated children", len(r.Duplicated))
	miss(len(r.Orphaned) == 0, "%d orphaned children", len(r.Orphaned))
	miss(r.NoopWrites == 0, "writes that changed nothing: %v %s", r.NoopWrites, r.NoopProblem)
	miss(r.Unreflected == 0 && r.LastAfterFault <= 30*time.Second,
		"every parent's last change reflected within 30 s of the last fault: %d unreflected, the slowest %s", r.Unreflected, r.LastAfterFault.Round(10*time.Millisecond))
	miss(r.lambdaSuccess() >= 0.999, "PythonLambda success outside their own pod's faults %.4f%%, want >= 99.9%%", 100*r.lambdaSuccess())
	miss(r.SyncErrors[faultGateway] == 0, "%.0f "+missedGatewaySyncs, r.SyncErrors[faultGateway])
	return out
}

// printSigns lists, by fault kind, the hook calls without a 200 and the syncs that
// neither failed nor succeeded.
func (r *Report) printSigns(out io.Writer) {
	for _, kind := range append(slices.Clone(allFaults), "none") {
		signs := r.SyncErrorSigns[kind]
		if len(signs) == 0 {
			continue
		}
		var parts []string
		for _, what := range slices.Sorted(maps.Keys(signs)) {
			parts = append(parts, fmt.Sprintf("%s ×%.0f", what, signs[what]))
		}
		fmt.Fprintf(out, "  %s: %s\n", kind, strings.Join(parts, ", "))
	}
}

func (r *Report) lambdaSuccess() float64 {
	if r.LambdaRequests == 0 {
		return 0
	}
	return 1 - float64(r.LambdaFailed)/float64(r.LambdaRequests)
}

// Print writes the tables.
func (r *Report) Print(out io.Writer) {
	fmt.Fprintf(out, "\nsoak: %s of load, a fault every %s on average (seed %d)\n\n", r.Config.Duration, r.Config.FaultInterval, r.Config.Seed)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "fault\tinjected\trecovery max\trequests\tfailed\tfailed syncs\t")
	for _, kind := range append(slices.Clone(allFaults), "none") {
		n, worst := 0, time.Duration(0)
		for _, f := range r.Faults {
			if f.kind == kind {
				n++
				worst = max(worst, f.recovered.Sub(f.start))
			}
		}
		injected, recovery := fmt.Sprint(n), worst.Round(100*time.Millisecond).String()
		if kind == "none" {
			injected, recovery = "-", "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%.0f\t\n", kind, injected, recovery, r.Requests[kind], r.Failed[kind], r.SyncErrors[kind])
	}
	w.Flush()
	if len(r.SyncErrorSigns) > 0 {
		fmt.Fprintln(out, "\nhook calls without a 200, and syncs neither failed nor done (a write conflict, a hook's Retry-After, a parent gone):")
		r.printSigns(out)
	}
	fmt.Fprintf(out, "\nparents: %d, changes written %d (%d writes failed)\n", r.Config.Parents, r.Writes, r.FailedWrites)
	fmt.Fprintf(out, "change -> children: p50 %s, p99 %s, max %s\n", r.ChangeP50.Round(10*time.Millisecond), r.ChangeP99.Round(10*time.Millisecond), r.ChangeMax.Round(10*time.Millisecond))
	fmt.Fprintf(out, "last change -> children: p99 %s, max %s; the slowest from the later of its change and the last fault's end: %s; unreflected %d\n",
		r.LastP99.Round(10*time.Millisecond), r.LastMax.Round(10*time.Millisecond), r.LastAfterFault.Round(10*time.Millisecond), r.Unreflected)
	fmt.Fprintf(out, "children lost %d, duplicated %d, orphaned %d\n", len(r.Lost), len(r.Duplicated), len(r.Orphaned))
	for _, l := range append(append(slices.Clone(r.Lost), r.Duplicated...), r.Orphaned...) {
		fmt.Fprintln(out, "  "+l)
	}
	fmt.Fprintf(out, "writes that changed nothing (a full resync after convergence): %v over %.0f hook calls %s\n", r.NoopWrites, r.NoopHookCalls, r.NoopProblem)
	fmt.Fprintf(out, "the sync Function's Ready condition at the end: %s\n", r.FunctionReady)
	if len(r.SyncErrorReasons) > 0 {
		fmt.Fprintln(out, "SyncError events of the parents (most frequent first):")
		for _, m := range r.SyncErrorReasons {
			fmt.Fprintln(out, "  "+m)
		}
	}
	fmt.Fprintf(out, "PythonLambda success outside their own pod's faults: %.3f%% (%d of %d failed)\n", 100*r.lambdaSuccess(), r.LambdaFailed, r.LambdaRequests)
	for _, f := range r.FailureSamples {
		fmt.Fprintln(out, "  "+f)
	}
	fmt.Fprintln(out, "\nfaults:")
	for _, f := range r.Faults {
		fmt.Fprintf(out, "  %s %-15s %-40s back after %5.1fs %s\n", f.start.Format(time.TimeOnly), f.kind, f.detail, f.recovered.Sub(f.start).Seconds(), f.err)
	}
	missed := r.Missed()
	if len(missed) == 0 {
		fmt.Fprintln(out, "\nevery target met")
		return
	}
	fmt.Fprintln(out, "\ntargets missed:")
	for _, m := range missed {
		fmt.Fprintln(out, "  "+m)
	}
}

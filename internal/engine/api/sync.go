package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/metalambda/metalambda/internal/engineapi"
	"github.com/metalambda/metalambda/internal/httpapi"
)

// maxSyncBody bounds the body of a sync on demand.
const maxSyncBody = 4 << 10

// checkSync answers 400 for a sync on demand no parent can match: a controller kind
// or name that no object can have, or a body that does not name one parent (a name,
// and a namespace for a namespaced one) or all of them. It leaves the body for the
// handler to read again.
func checkSync(r *http.Request) error {
	if err := checkControllerPath(r); err != nil {
		return err
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, maxSyncBody+1))
	if err != nil {
		return httpapi.NewError(http.StatusBadRequest, "bad_request", "reading the body: "+err.Error())
	}
	if len(data) > maxSyncBody {
		return httpapi.NewError(http.StatusRequestEntityTooLarge, "too_large", "the body of a sync is at most "+strconv.Itoa(maxSyncBody)+" bytes")
	}
	r.Body = io.NopCloser(bytes.NewReader(data))
	_, err = parseSyncRequest(data)
	return err
}

func parseSyncRequest(data []byte) (engineapi.SyncRequest, error) {
	var req engineapi.SyncRequest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, httpapi.NewError(http.StatusBadRequest, "bad_request", `the body must be {"namespace": NS, "name": NAME} (no namespace for a cluster-scoped parent) or {"all": true}: `+err.Error())
	}
	switch {
	case req.All && (req.Name != "" || req.Namespace != "" || req.Kind != ""):
		return req, httpapi.NewError(http.StatusBadRequest, "bad_request", `"all" syncs every parent: it takes no namespace, name or kind`)
	case req.All:
		return req, nil
	case req.Name == "":
		return req, httpapi.NewError(http.StatusBadRequest, "bad_request", `name a parent ({"namespace": NS, "name": NAME}, no namespace for a cluster-scoped parent) or sync all of them ({"all": true})`)
	}
	if err := httpapi.CheckNames(req.Namespace, req.Name); err != nil {
		return req, err
	}
	return req, nil
}

// sync queues one parent of a controller, or all of them, for a sync now. The caller
// is authorized before anything is looked up, as for a parent's detail: get on the
// controller, then update on the parent's name in each of the controller's parent
// resources; only the resources it may update are searched, so that a 404 or 409
// speaks only of parents it may update. All parents are those in the namespaces
// where the caller may update their resource (cluster-wide for cluster-scoped ones).
func (s *server) sync(ctx context.Context, c *caller, r *http.Request) (any, error) {
	ref := controllerRef(r)
	data, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, httpapi.NewError(http.StatusBadRequest, "bad_request", "reading the body: "+err.Error())
	}
	req, err := parseSyncRequest(data)
	if err != nil {
		return nil, err
	}
	if ref.Namespace != "" && !req.All {
		// A namespaced controller's parents are in its namespace.
		if req.Namespace != "" && req.Namespace != ref.Namespace {
			return nil, httpapi.NewError(http.StatusBadRequest, "bad_request", fmt.Sprintf("the parents of %s are in namespace %s; leave the namespace out or name that one", describe(ref), ref.Namespace))
		}
		req.Namespace = ref.Namespace
	}
	ctl, err := s.runningController(ctx, c, ref)
	if err != nil {
		return nil, err
	}
	if req.All {
		return syncAll(ctx, c, ctl, ref)
	}
	return syncOne(ctx, c, ctl, ref, req)
}

// syncOne queues the parent req names, among the parent resources of ctl in which the
// caller may update it.
func syncOne(ctx context.Context, c *caller, ctl Controller, ref engineapi.ControllerRef, req engineapi.SyncRequest) (any, error) {
	mayUpdate, err := mayOnParent(ctx, c, ctl, "update", req.Namespace, req.Name)
	if err != nil {
		return nil, err
	}
	var found []Parent
	for _, p := range ctl.Parents(req.Namespace, req.Name, req.Kind) {
		if mayUpdate[p.Resource] {
			found = append(found, p)
		}
	}
	parent, err := oneParent(found, ref, req.Namespace, req.Name, `add "kind": KIND to the body`)
	if err != nil {
		return nil, err
	}
	out := engineapi.SyncResult{Controller: ref, Parents: []engineapi.QueuedParent{}}
	addQueued(&out, parent, ctl.Enqueue(parent))
	return out, nil
}

// syncAll queues every parent of ctl in a namespace where the caller may update its
// resource. It is a 403, naming the resources but not the namespaces, when there are
// parents and the caller may update none: the parent count is no secret to a caller
// that may get the controller (its summary shows it), their namespaces are.
func syncAll(ctx context.Context, c *caller, ctl Controller, ref engineapi.ControllerRef) (any, error) {
	out := engineapi.SyncResult{Controller: ref, Parents: []engineapi.QueuedParent{}}
	var denied []string
	// A caller who may update a resource cluster-wide is asked about it once, not
	// once per namespace: a request's reviews are bounded (maxChecksPerRequest).
	clusterWide := map[Resource]bool{}
	for _, p := range ctl.AllParents() {
		x := access{verb: "update", group: p.Resource.Group, resource: p.Resource.Resource, namespace: p.Object.GetNamespace()}
		all, asked := clusterWide[p.Resource]
		if !asked {
			var err error
			if all, err = c.may(ctx, access{verb: x.verb, group: x.group, resource: x.resource}); err != nil {
				return nil, err
			}
			clusterWide[p.Resource] = all
		}
		ok := all
		if !ok {
			var err error
			if ok, err = c.may(ctx, x); err != nil {
				return nil, err
			}
		}
		if !ok {
			out.NotPermitted++
			if what := (access{group: x.group, resource: x.resource}).String(); !slices.Contains(denied, what) {
				denied = append(denied, what)
			}
			continue
		}
		addQueued(&out, p, ctl.Enqueue(p))
	}
	if out.Queued == 0 && out.NotPermitted > 0 {
		return nil, httpapi.NewError(http.StatusForbidden, "forbidden", fmt.Sprintf(
			"user %q may update none of the %d parents of %s %s: syncing all of them needs update on %s in their namespaces, or cluster-wide",
			c.User.Username, out.NotPermitted, ref.Kind, ref.Name, strings.Join(denied, ", ")))
	}
	return out, nil
}

// addQueued counts p in out, and names it while out names fewer than
// engineapi.MaxSyncNames; held is how long its hook's Retry-After still holds it.
func addQueued(out *engineapi.SyncResult, p Parent, held time.Duration) {
	out.Queued++
	if len(out.Parents) >= engineapi.MaxSyncNames {
		return
	}
	q := engineapi.QueuedParent{ObjectRef: apiObjectRef(p.Object)}
	if held > 0 {
		until := time.Now().Add(held).UTC().Truncate(time.Second)
		q.HeldUntil = &until
	}
	out.Parents = append(out.Parents, q)
}

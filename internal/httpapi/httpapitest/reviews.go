// Package httpapitest is a stand-in Kubernetes API for tests of httpapi.Auth: it
// answers TokenReviews and SubjectAccessReviews over HTTP, as the API server does, so
// that the tests go through client-go's real transport, errors and retries.
package httpapitest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Tokens the Reviews accept: GoodToken is user "dev" (group "devs"), ViewerToken
// user "viewer", whose requests Refused names are refused.
const (
	GoodToken   = "good-token"
	ViewerToken = "viewer-token"
)

// Reviews answers TokenReviews (only its Accepted tokens are accepted) and
// SubjectAccessReviews (everything is allowed but what Refused names for user
// "viewer", or what Allow says), and counts them. Set Refused, Allow and Hold before
// the first request.
type Reviews struct {
	Kube          kubernetes.Interface
	TokenReviews  atomic.Int64
	AccessReviews atomic.Int64
	Accepted      map[string]bool
	// Refused are the verbs (or "get /metrics" for a path) refused to user "viewer".
	Refused map[string]bool
	// Failing makes every review answer 500, as an API server in trouble does.
	Failing atomic.Bool
	// Allow, when set, decides every SubjectAccessReview instead of Refused.
	Allow func(*authorizationv1.SubjectAccessReview) bool
	// Calls counts every request, the ones Failing answers 500 too.
	Calls atomic.Int64
	// Hold, when set, holds every request until it is closed; Held counts the
	// requests that came to it.
	Hold chan struct{}
	Held atomic.Int64
	mu   sync.Mutex
}

// NewReviews starts the stand-in API for the test t.
func NewReviews(t testing.TB) *Reviews {
	api := &Reviews{Accepted: map[string]bool{GoodToken: true, ViewerToken: true}, Refused: map[string]bool{}}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	// No client-side rate limit (QPS < 0): tests send thousands of reviews.
	kube, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL, QPS: -1, ContentConfig: rest.ContentConfig{ContentType: "application/json"}})
	if err != nil {
		t.Fatal(err)
	}
	api.Kube = kube
	return api
}

func (api *Reviews) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	api.Calls.Add(1)
	if api.Hold != nil {
		api.Held.Add(1)
		<-api.Hold
	}
	if api.Failing.Load() {
		http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"etcd is away","code":500}`, http.StatusInternalServerError)
		return
	}
	var out any
	switch r.URL.Path {
	case "/apis/authentication.k8s.io/v1/tokenreviews":
		var tr authenticationv1.TokenReview
		if !decode(w, r, &tr) {
			return
		}
		api.TokenReviews.Add(1)
		api.reviewToken(&tr)
		tr.APIVersion, tr.Kind = "authentication.k8s.io/v1", "TokenReview" // as the API server answers
		out = &tr
	case "/apis/authorization.k8s.io/v1/subjectaccessreviews":
		var sar authorizationv1.SubjectAccessReview
		if !decode(w, r, &sar) {
			return
		}
		api.AccessReviews.Add(1)
		api.reviewAccess(&sar)
		sar.APIVersion, sar.Kind = "authorization.k8s.io/v1", "SubjectAccessReview"
		out = &sar
	default:
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(out)
}

func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return false
	}
	return true
}

func (api *Reviews) reviewToken(tr *authenticationv1.TokenReview) {
	api.mu.Lock()
	defer api.mu.Unlock()
	if !api.Accepted[tr.Spec.Token] {
		// As the API server refuses a token: with its reason.
		tr.Status.Error = "[invalid bearer token, token lookup failed]"
		return
	}
	tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "dev", Groups: []string{"devs"}}}
	if tr.Spec.Token == ViewerToken {
		tr.Status.User.Username = "viewer"
	}
}

func (api *Reviews) reviewAccess(sar *authorizationv1.SubjectAccessReview) {
	verb := ""
	if ra := sar.Spec.ResourceAttributes; ra != nil {
		verb = ra.Verb
	} else if nra := sar.Spec.NonResourceAttributes; nra != nil {
		verb = nra.Verb + " " + nra.Path
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	if api.Allow != nil {
		sar.Status.Allowed = api.Allow(sar)
		return
	}
	sar.Status.Allowed = sar.Spec.User != "viewer" || !api.Refused[verb]
}

package engine

import (
	"context"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	kjson "sigs.k8s.io/json"

	"github.com/metalambda/metalambda/internal/engine/slim"
	"github.com/metalambda/metalambda/internal/jsonvalue"
)

// metaAccept asks the API server to answer a write with the object's metadata alone,
// falling back to the whole object where it cannot.
const metaAccept = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"

// metaWrites sends the writes of which the engine reads nothing back but the written
// object's identity and resourceVersion.
type metaWrites interface {
	create(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, fieldManager string) (*unstructured.Unstructured, error)
	updateStatus(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, fieldManager string) (*unstructured.Unstructured, error)
}

// metaWriter is the metaWrites of the engine. The API server answers its writes with
// metadata only, which it decodes into a typed struct. Through the dynamic client each
// answer was the whole object decoded into maps, managedFields included; that was
// about a third of the memory the engine allocated while converging.
type metaWriter struct {
	rest rest.Interface
	// userAgent is the User-Agent the HTTP client's round tripper would set: a request
	// that carries it already goes through as it is, where the round tripper copied
	// every request to set it.
	userAgent string
}

// newMetaWriter builds a metaWriter that sends requests as the dynamic client built
// from cfg and client would.
func newMetaWriter(cfg *rest.Config, client *http.Client) (*metaWriter, error) {
	rc, err := dynamicREST(cfg, client, func(c *rest.Config) { c.AcceptContentTypes = metaAccept })
	if err != nil {
		return nil, err
	}
	return &metaWriter{rest: rc, userAgent: cfg.UserAgent}, nil
}

// create creates obj and returns its metadata as an object.
func (w *metaWriter) create(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, fieldManager string) (*unstructured.Unstructured, error) {
	return w.do(ctx, w.rest.Post().AbsPath(resourcePath(gvr, obj.GetNamespace())...), obj, fieldManager)
}

// updateStatus writes obj's status through the status subresource and returns the
// written object's metadata as an object.
func (w *metaWriter) updateStatus(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, fieldManager string) (*unstructured.Unstructured, error) {
	return w.do(ctx, w.rest.Put().AbsPath(append(resourcePath(gvr, obj.GetNamespace()), obj.GetName(), "status")...), obj, fieldManager)
}

func (w *metaWriter) do(ctx context.Context, req *rest.Request, obj *unstructured.Unstructured, fieldManager string) (*unstructured.Unstructured, error) {
	body, err := jsonvalue.Marshal(obj.Object)
	if err != nil {
		return nil, err
	}
	if fieldManager != "" {
		req = req.Param("fieldManager", fieldManager)
	}
	if w.userAgent != "" {
		req = req.SetHeader("User-Agent", w.userAgent)
	}
	result := req.SetHeader("Content-Type", "application/json").Body(body).Do(ctx)
	if err := result.Error(); err != nil {
		return nil, err
	}
	raw, err := result.Raw()
	if err != nil {
		return nil, err
	}
	return readMetadata(raw)
}

// readMetadata reads what the engine needs of a write's answer: in one pass over its
// JSON, or, for an answer that pass declines, by decoding its metadata. Decoding the
// metadata of every answer, managedFields and timestamps included, was about a tenth
// of the engine's CPU while parents converged.
func readMetadata(raw []byte) (*unstructured.Unstructured, error) {
	if id, ok := slim.ReadIdentity(raw); ok {
		return metadataObject(id), nil
	}
	var meta metav1.PartialObjectMetadata
	if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, &meta); err != nil {
		return nil, err
	}
	m := meta.ObjectMeta
	return metadataObject(slim.Identity{Name: m.Name, Namespace: m.Namespace, UID: string(m.UID), ResourceVersion: m.ResourceVersion, Generation: m.Generation}), nil
}

// dynamicREST is a REST client configured as the dynamic client configures its own,
// changed by tweak; dynamic.New over it is a dynamic client.
func dynamicREST(cfg *rest.Config, client *http.Client, tweak func(*rest.Config)) (rest.Interface, error) {
	c := dynamic.ConfigFor(cfg)
	c.GroupVersion = nil
	tweak(c)
	return rest.UnversionedRESTClientForConfigAndClient(c, client)
}

// metadataObject is an object holding only what the engine reads of a write's answer.
func metadataObject(id slim.Identity) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetNamespace(id.Namespace)
	u.SetName(id.Name)
	u.SetUID(types.UID(id.UID))
	u.SetResourceVersion(id.ResourceVersion)
	u.SetGeneration(id.Generation)
	return u
}

// resourcePath is the URL path of a resource's collection, as the dynamic client
// builds it.
func resourcePath(gvr schema.GroupVersionResource, namespace string) []string {
	path := []string{"apis", gvr.Group, gvr.Version}
	if gvr.Group == "" {
		path = []string{"api", gvr.Version}
	}
	if namespace != "" {
		path = append(path, "namespaces", namespace)
	}
	return append(path, gvr.Resource)
}

// dynamicWrites sends them through a dynamic client, which answers whole objects; unit
// tests use it with client-go's fake.
type dynamicWrites struct{ dynamic dynamic.Interface }

func (d dynamicWrites) resource(gvr schema.GroupVersionResource, namespace string) dynamic.ResourceInterface {
	if namespace == "" {
		return d.dynamic.Resource(gvr)
	}
	return d.dynamic.Resource(gvr).Namespace(namespace)
}

func (d dynamicWrites) create(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, fieldManager string) (*unstructured.Unstructured, error) {
	return d.resource(gvr, obj.GetNamespace()).Create(ctx, obj, metav1.CreateOptions{FieldManager: fieldManager})
}

func (d dynamicWrites) updateStatus(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, fieldManager string) (*unstructured.Unstructured, error) {
	return d.resource(gvr, obj.GetNamespace()).UpdateStatus(ctx, obj, metav1.UpdateOptions{FieldManager: fieldManager})
}

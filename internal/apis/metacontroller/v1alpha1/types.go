package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// CompositeController manages children of each parent object.
type CompositeController struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   CompositeControllerSpec `json:"spec"`
	Status ControllerStatus        `json:"status,omitempty"`
}

// CompositeControllerSpec is the desired behaviour of a CompositeController.
type CompositeControllerSpec struct {
	ParentResource      CompositeControllerParentResourceRule  `json:"parentResource"`
	ChildResources      []CompositeControllerChildResourceRule `json:"childResources,omitempty"`
	Hooks               *CompositeControllerHooks              `json:"hooks,omitempty"`
	ResyncPeriodSeconds *int32                                 `json:"resyncPeriodSeconds,omitempty"`
	GenerateSelector    *bool                                  `json:"generateSelector,omitempty"`
	EndpointConfigs     []EndpointConfig                       `json:"endpointConfigs,omitempty"`
}

// ResourceRule names a resource by apiVersion and plural resource name.
type ResourceRule struct {
	APIVersion string `json:"apiVersion"`
	Resource   string `json:"resource"`
}

// CompositeControllerParentResourceRule selects the parent resource.
type CompositeControllerParentResourceRule struct {
	ResourceRule        `json:",inline"`
	RevisionHistory     *CompositeControllerRevisionHistory `json:"revisionHistory,omitempty"`
	LabelSelector       *metav1.LabelSelector               `json:"labelSelector,omitempty"`
	IgnoreStatusChanges *bool                               `json:"ignoreStatusChanges,omitempty"`
}

// CompositeControllerRevisionHistory lists the parent fields that define a revision.
type CompositeControllerRevisionHistory struct {
	FieldPaths []string `json:"fieldPaths,omitempty"`
}

// CompositeControllerChildResourceRule declares one child type.
type CompositeControllerChildResourceRule struct {
	ResourceRule   `json:",inline"`
	UpdateStrategy *CompositeControllerChildUpdateStrategy `json:"updateStrategy,omitempty"`
}

// CompositeControllerChildUpdateStrategy says how children of one type are updated.
type CompositeControllerChildUpdateStrategy struct {
	Method       ChildUpdateMethod        `json:"method,omitempty"`
	StatusChecks *ChildUpdateStatusChecks `json:"statusChecks,omitempty"`
}

// ChildUpdateMethod is how a child that differs from the desired state is updated.
type ChildUpdateMethod string

// Update methods.
const (
	ChildUpdateOnDelete        ChildUpdateMethod = "OnDelete"
	ChildUpdateRecreate        ChildUpdateMethod = "Recreate"
	ChildUpdateInPlace         ChildUpdateMethod = "InPlace"
	ChildUpdateRollingRecreate ChildUpdateMethod = "RollingRecreate"
	ChildUpdateRollingInPlace  ChildUpdateMethod = "RollingInPlace"
)

// ChildUpdateStatusChecks gate rolling updates.
type ChildUpdateStatusChecks struct {
	Conditions []StatusConditionCheck `json:"conditions,omitempty"`
}

// StatusConditionCheck is one condition a child must report.
type StatusConditionCheck struct {
	Type   string  `json:"type"`
	Status *string `json:"status,omitempty"`
	Reason *string `json:"reason,omitempty"`
}

// CompositeControllerHooks are the hooks of a CompositeController.
type CompositeControllerHooks struct {
	Customize       *Hook `json:"customize,omitempty"`
	Sync            *Hook `json:"sync,omitempty"`
	Finalize        *Hook `json:"finalize,omitempty"`
	PreUpdateChild  *Hook `json:"preUpdateChild,omitempty"`
	PostUpdateChild *Hook `json:"postUpdateChild,omitempty"`
}

// ControllerStatus is the (empty upstream) status of a controller object; Metalambda
// reports conditions here, such as fields it does not support.
type ControllerStatus struct {
	ObservedGeneration int64              `json:"observedGeneration,omitempty"`
	Conditions         []metav1.Condition `json:"conditions,omitempty"`
}

// DecoratorController adds labels, annotations, status and attachments to objects it
// selects.
type DecoratorController struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   DecoratorControllerSpec `json:"spec"`
	Status ControllerStatus        `json:"status,omitempty"`
}

// DecoratorControllerSpec is the desired behaviour of a DecoratorController.
type DecoratorControllerSpec struct {
	Resources           []DecoratorControllerResourceRule   `json:"resources"`
	Attachments         []DecoratorControllerAttachmentRule `json:"attachments,omitempty"`
	Hooks               *DecoratorControllerHooks           `json:"hooks,omitempty"`
	ResyncPeriodSeconds *int32                              `json:"resyncPeriodSeconds,omitempty"`
	EndpointConfigs     []EndpointConfig                    `json:"endpointConfigs,omitempty"`
}

// DecoratorControllerResourceRule selects target objects.
type DecoratorControllerResourceRule struct {
	ResourceRule        `json:",inline"`
	LabelSelector       *metav1.LabelSelector `json:"labelSelector,omitempty"`
	AnnotationSelector  *AnnotationSelector   `json:"annotationSelector,omitempty"`
	IgnoreStatusChanges *bool                 `json:"ignoreStatusChanges,omitempty"`
}

// AnnotationSelector selects objects by annotations, like a label selector.
type AnnotationSelector struct {
	MatchAnnotations map[string]string                 `json:"matchAnnotations,omitempty"`
	MatchExpressions []metav1.LabelSelectorRequirement `json:"matchExpressions,omitempty"`
}

// DecoratorControllerAttachmentRule declares one attachment type.
type DecoratorControllerAttachmentRule struct {
	ResourceRule   `json:",inline"`
	UpdateStrategy *DecoratorControllerAttachmentUpdateStrategy `json:"updateStrategy,omitempty"`
}

// DecoratorControllerAttachmentUpdateStrategy says how attachments are updated.
type DecoratorControllerAttachmentUpdateStrategy struct {
	Method ChildUpdateMethod `json:"method,omitempty"`
}

// DecoratorControllerHooks are the hooks of a DecoratorController.
type DecoratorControllerHooks struct {
	Customize *Hook `json:"customize,omitempty"`
	Sync      *Hook `json:"sync,omitempty"`
	Finalize  *Hook `json:"finalize,omitempty"`
}

// HookVersion selects the hook request format.
type HookVersion string

// Hook versions.
const (
	HookVersionV1 HookVersion = "v1"
	HookVersionV2 HookVersion = "v2"
)

// Hook is one hook: today always a webhook.
type Hook struct {
	Webhook *Webhook     `json:"webhook,omitempty"`
	Version *HookVersion `json:"version,omitempty"`
}

// Webhook says where and how to call a hook.
type Webhook struct {
	URL                    *string               `json:"url,omitempty"`
	Timeout                *metav1.Duration      `json:"timeout,omitempty"`
	Path                   *string               `json:"path,omitempty"`
	Service                *ServiceReference     `json:"service,omitempty"`
	Etag                   *WebhookEtagConfig    `json:"etag,omitempty"`
	ResponseUnMarshallMode *string               `json:"responseUnMarshallMode,omitempty"`
	CABundle               *CABundle             `json:"caBundle,omitempty"`
	Authorization          *WebhookAuthorization `json:"authorization,omitempty"`
	BasicAuth              *BasicAuth            `json:"basicAuth,omitempty"`
	ClientTLS              *ClientTLS            `json:"clientTLS,omitempty"`
}

// ServiceReference names a Service that serves a webhook.
type ServiceReference struct {
	Name      string  `json:"name"`
	Namespace string  `json:"namespace"`
	Port      *int32  `json:"port,omitempty"`
	Protocol  *string `json:"protocol,omitempty"`
}

// WebhookEtagConfig enables ETag caching of hook responses.
type WebhookEtagConfig struct {
	Enabled             *bool  `json:"enabled,omitempty"`
	CacheTimeoutSeconds *int32 `json:"cacheTimeoutSeconds,omitempty"`
	CacheCleanupSeconds *int32 `json:"cacheCleanupSeconds,omitempty"`
}

// CABundle is a CA to trust, inline or from a Secret or ConfigMap.
type CABundle struct {
	Inline       *string       `json:"inline,omitempty"`
	SecretRef    *KeyReference `json:"secretRef,omitempty"`
	ConfigMapRef *KeyReference `json:"configMapRef,omitempty"`
}

// KeyReference points at one key of a Secret or ConfigMap.
type KeyReference struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	Key       string `json:"key,omitempty"`
}

// WebhookAuthorization sends an Authorization header from a Secret.
type WebhookAuthorization struct {
	Type      *string       `json:"type,omitempty"`
	SecretRef *KeyReference `json:"secretRef,omitempty"`
}

// BasicAuth sends HTTP basic credentials from a Secret.
type BasicAuth struct {
	SecretRef   *KeyReference `json:"secretRef,omitempty"`
	UsernameKey *string       `json:"usernameKey,omitempty"`
	PasswordKey *string       `json:"passwordKey,omitempty"`
}

// ClientTLS presents a client certificate from a Secret.
type ClientTLS struct {
	SecretRef     *KeyReference `json:"secretRef,omitempty"`
	CertKey       *string       `json:"certKey,omitempty"`
	PrivateKeyKey *string       `json:"privateKeyKey,omitempty"`
}

// EndpointConfig holds TLS and auth settings for every hook on one host.
type EndpointConfig struct {
	Host          string                `json:"host"`
	CABundle      *CABundle             `json:"caBundle,omitempty"`
	ClientTLS     *ClientTLS            `json:"clientTLS,omitempty"`
	Authorization *WebhookAuthorization `json:"authorization,omitempty"`
	BasicAuth     *BasicAuth            `json:"basicAuth,omitempty"`
}

// RelatedResourceRule is one entry of a customize hook response.
type RelatedResourceRule struct {
	ResourceRule      `json:",inline"`
	LabelSelector     *metav1.LabelSelector `json:"labelSelector,omitempty"`
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
	Namespace         string                `json:"namespace,omitempty"`
	Names             []string              `json:"names,omitempty"`
}

// ControllerRevision records the parent fields and children of one revision; it is
// used by rolling updates.
type ControllerRevision struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	ParentPatch runtime.RawExtension         `json:"parentPatch"`
	Children    []ControllerRevisionChildren `json:"children,omitempty"`
}

// ControllerRevisionChildren names children of one kind in a revision.
type ControllerRevisionChildren struct {
	APIGroup string   `json:"apiGroup"`
	Kind     string   `json:"kind"`
	Names    []string `json:"names"`
}

package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// NexoResultCacheSpec caches query results.
type NexoResultCacheSpec struct {
	// ttl of a cached result.
	TTL Duration `json:"ttl"`

	// maxEntries cached per proxy pod.
	// +optional
	// +kubebuilder:default=10000
	// +kubebuilder:validation:Minimum=1
	MaxEntries int32 `json:"maxEntries,omitempty"`

	// collections whose reads are cached, as database.collection.
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:items:Pattern=`^[^.$ ]+\.[^$ ]+$`
	Collections []string `json:"collections"`
}

// NexoResultCache caches query results. Schema only in this build: the operator does not reconcile it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=nexoresultcaches,shortName=nxcache,categories=nexo,scope=Namespaced
// +kubebuilder:printcolumn:name="Support",type=string,JSONPath=`.status.support`,description="SchemaOnly: stored, never reconciled by this bundle's operator"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NexoResultCache struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec NexoResultCacheSpec `json:"spec"`
	// +kubebuilder:default={support: SchemaOnly}
	Status SchemaOnlyStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// NexoResultCacheList contains a list of NexoResultCache.
type NexoResultCacheList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NexoResultCache `json:"items"`
}

func init() { SchemeBuilder.Register(&NexoResultCache{}, &NexoResultCacheList{}) }

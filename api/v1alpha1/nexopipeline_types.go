package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// NexoPipelineSpec orders the router and the steps a proxy runs. Every reference names an
// object in the pipeline's namespace; the kind must be one the slot allows.
// +kubebuilder:validation:XValidation:rule="has(self.router) || size(self.request) + size(self.response) + size(self.connection) > 0",message="a pipeline needs a router or at least one request, response or connection step"
type NexoPipelineSpec struct {
	// router decides which upstream target serves each operation; without one, all traffic goes
	// to the proxy's upstream.
	// +optional
	Router *RouterRef `json:"router,omitempty"`

	// request steps run in order on every client request.
	// +optional
	// +kubebuilder:default={}
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:XValidation:rule="self.all(x, self.exists_one(y, y.kind == x.kind && y.name == x.name))",message="request must not list the same {kind, name} step twice; remove the duplicate"
	Request []RequestStepRef `json:"request"`

	// response steps run in order on every reply.
	// +optional
	// +kubebuilder:default={}
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:XValidation:rule="self.all(x, self.exists_one(y, y.kind == x.kind && y.name == x.name))",message="response must not list the same {kind, name} step twice; remove the duplicate"
	Response []ResponseStepRef `json:"response"`

	// connection steps govern client and upstream connections.
	// +optional
	// +kubebuilder:default={}
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.all(x, self.exists_one(y, y.kind == x.kind && y.name == x.name))",message="connection must not list the same {kind, name} step twice; remove the duplicate"
	Connection []ConnectionStepRef `json:"connection"`
}

// NexoPipeline orders router, request, response and connection references.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=nexopipelines,shortName=nxpipe,categories=nexo,scope=Namespaced
// +kubebuilder:printcolumn:name="Router",type=string,JSONPath=`.spec.router.name`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NexoPipeline struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NexoPipelineSpec `json:"spec"`
	Status Status           `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// NexoPipelineList contains a list of NexoPipeline.
type NexoPipelineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NexoPipeline `json:"items"`
}

func init() { SchemeBuilder.Register(&NexoPipeline{}, &NexoPipelineList{}) }

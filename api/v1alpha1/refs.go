package v1alpha1

// Each reference type below limits its kind to the kinds the catalog allows in that slot.
// The enums are literal markers (controller-gen needs literals); catalog_test.go fails when a
// generated CRD's enum differs from catalog.InSlot.

// RouterRef references the router of a pipeline.
type RouterRef struct {
	// kind of the router.
	// +kubebuilder:validation:Enum=NexoRouter;NexoTrafficSplit;NexoShadowTraffic
	Kind string `json:"kind"`
	// name of the router in the same namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// RequestStepRef references a request step.
type RequestStepRef struct {
	// kind of the request step.
	// +kubebuilder:validation:Enum=NexoTenantIsolation;NexoRateLimit;NexoCommandPolicy;NexoAuthPolicy;NexoQueryGuard;NexoFieldEncryption;NexoSchemaValidation
	Kind string `json:"kind"`
	// name of the step in the same namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// ResponseStepRef references a response step.
type ResponseStepRef struct {
	// kind of the response step.
	// +kubebuilder:validation:Enum=NexoPIIMasking;NexoResponseLimit;NexoFieldEncryption;NexoResultCache
	Kind string `json:"kind"`
	// name of the step in the same namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// ConnectionStepRef references a connection step.
type ConnectionStepRef struct {
	// kind of the connection step.
	// +kubebuilder:validation:Enum=NexoConnectionPool;NexoConnectionLimit;NexoConnectionPipeline
	Kind string `json:"kind"`
	// name of the step in the same namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// ObservabilityRef references an observability object from a NexoProxy.
type ObservabilityRef struct {
	// kind of the observability object.
	// +kubebuilder:validation:Enum=NexoMetrics;NexoTracing;NexoAuditLog;NexoAccessLog
	Kind string `json:"kind"`
	// name of the object in the same namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

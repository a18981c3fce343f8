package operator

// Leader election lease and events in the operator namespace.
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=nexo-system,resources=leases,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups="",namespace=nexo-system,resources=events,verbs=create;patch
// The trusted-keys Secret and the registry credentials that pull Secrets are copied from.
// +kubebuilder:rbac:groups="",namespace=nexo-system,resources=secrets,verbs=get;list;watch
// The installation ConfigMap's environmentID, when --environment-id is not set (read by name).
// +kubebuilder:rbac:groups="",namespace=nexo-system,resources=configmaps,resourceNames=nexo-manager-config,verbs=get

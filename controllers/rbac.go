package controllers

// RBAC the operator needs, as kubebuilder markers; `make manifests` generates
// config/rbac/generated/role.yaml from them. Each rule is justified in docs/rbac.md. The rules
// on the Nexo kinds and on a proxy's children are generated from the catalog and
// render.Children (zz_generated.rbac.go, by hack/rbacmarkers); the ones below are the rest.
//
// Events on NexoProxies (phase changes, blocked reasons, conflicts, rollouts), in the proxies'
// namespaces, through the core API (controllers/eventpost).
// +kubebuilder:rbac:groups="",resources=events,verbs=create
//
// Leader election (in the operator namespace; see config/rbac/leader_election_role.yaml) and
// events are namespaced and granted separately.

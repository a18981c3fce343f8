package controllers

// RBAC the operator needs, as kubebuilder markers; `make manifests` generates
// config/rbac/role.yaml from them. Each rule is justified in docs/rbac.md.
//
// Nexo kinds: the reconciled ones are read and their status written; schema-only kinds are only
// listed (preflight-style reporting never needs more).
// +kubebuilder:rbac:groups=nexo.io,resources=nexoproxies;nexopipelines;nexodeploymentprofiles;nexolicenses;nexorouters;nexotrafficsplits;nexotenantisolations;nexoratelimits;nexocommandpolicies;nexoauthpolicies;nexopiimaskings;nexoresponselimits;nexoconnectionpools;nexoconnectionlimits;nexometrics;nexotracings;nexoauditlogs;nexoaccesslogs,verbs=get;list;watch
// +kubebuilder:rbac:groups=nexo.io,resources=nexoproxies/status;nexopipelines/status;nexodeploymentprofiles/status;nexolicenses/status;nexorouters/status;nexotrafficsplits/status;nexotenantisolations/status;nexoratelimits/status;nexocommandpolicies/status;nexoauthpolicies/status;nexopiimaskings/status;nexoresponselimits/status;nexoconnectionpools/status;nexoconnectionlimits/status;nexometrics/status;nexotracings/status;nexoauditlogs/status;nexoaccesslogs/status,verbs=get;update;patch
//
// Generated children of a NexoProxy, in the proxy's namespace.
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=services;configmaps,verbs=get;list;watch;create;update;patch;delete
//
// Secrets: read referenced ones (TLS, CAs, credentials, salts, license) and write the proxy's
// copies of shareable pull secrets (create, correct, and delete when no profile names them, or
// roll back after a conflict). hack/genpkg splits this rule: reads go with the rules above, the
// writes into their own ClusterRole (nexo-operator-secret-copies) that is only ever bound by
// RoleBindings in the namespaces where copies are allowed, never cluster-wide (docs/rbac.md).
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch;delete
//
// Events on NexoProxies (phase changes, blocked reasons, conflicts, rollouts), in the proxies'
// namespaces, through the events.k8s.io API (controllers/eventpost).
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create
//
// Leader election (in the operator namespace; see config/rbac/leader_election_role.yaml) and
// events are namespaced and granted separately.

// Package wire holds the names that cross a process boundary: the objects, keys, labels and
// annotations one component writes and another reads (the Manager and nexoctl, the Control
// Plane's signatures and the operator, the chart and the binaries). A name lives here once, so
// a reader cannot drift from its writer. It imports only the standard library.
package wire

import (
	"slices"
	"strings"
)

// WatchNamespacesEnv carries the namespaces an installation serves into the operator and the
// Manager: OLM's olm.targetNamespaces annotation, through the CSV's Deployments ("" under an
// AllNamespaces OperatorGroup). Both binaries read it as the default of --watch-namespaces.
const WatchNamespacesEnv = "WATCH_NAMESPACES"

// SplitNamespaces reads a comma-separated namespace list (--watch-namespaces,
// WatchNamespacesEnv): trimmed, empty entries dropped, each namespace once. Empty means all.
func SplitNamespaces(s string) []string {
	var out []string
	for _, ns := range strings.Split(s, ",") {
		if ns = strings.TrimSpace(ns); ns != "" && !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	return out
}

// Deployments and ServiceAccounts of an installation (chart, kustomize and CSV use these names).
const (
	OperatorName = "nexo-operator"
	ManagerName  = "nexo-manager"
)

// Secrets in the installation namespace.
const (
	// ConnectTokenSecret holds the connect token under ConnectTokenKey; nexoctl install writes
	// it outside Helm, the Manager reads it.
	ConnectTokenSecret = "nexo-connect-token"
	ConnectTokenKey    = "token"
	// TrustedKeysSecret holds the public keys that verify managed resources; the Manager keeps
	// its control-plane-* entries equal to the Control Plane's advertised keys, the operator
	// and the Manager follow it.
	TrustedKeysSecret = "nexo-trusted-keys"
	// TrustedKeysSavedSecret carries the trusted keys across an OLM upgrade from a release whose
	// bundle shipped TrustedKeysSecret (OLM deletes that one with the old CSV): nexoctl install
	// saves them there before the upgrade and puts them back after it (docs/upgrade.md, "OLM").
	TrustedKeysSavedSecret = "nexo-trusted-keys-saved"
)

// The installation's configuration ConfigMap (kustomize and the OperatorHub console: created by
// the installer, docs/operator.md): the Control Plane URL the Manager connects to and the
// environment id the operator checks signatures against, when no flag or environment variable
// sets them. Both binaries read it by name and wait for it.
const (
	InstallConfigMap    = "nexo-manager-config"
	ConfigControlPlane  = "controlPlaneURL"
	ConfigEnvironmentID = "environmentID"
)

// The Manager's ConfigMaps and the keys of its status, which nexoctl status, preflight and
// support-bundle read.
const (
	// ManagerStateConfigMap remembers applied command ids across restarts.
	ManagerStateConfigMap = "nexo-manager-state"
	// ManagerStatusConfigMap is the Manager's last heartbeat and command outcome (never the token).
	ManagerStatusConfigMap = "nexo-manager-status"

	StatusLastHeartbeatTime = "lastHeartbeatTime" // RFC 3339, UTC
	// StatusHeartbeatInterval is the interval the Control Plane asked for in its last answer,
	// in seconds: the unit of a heartbeat's age (stale past 3, lost past 10).
	StatusHeartbeatInterval     = "heartbeatIntervalSeconds"
	StatusLastHeartbeatResult   = "lastHeartbeatResult"
	StatusControlPlaneReachable = "controlPlaneReachable" // "true" or "false"
	// StatusConfigured is "true" once the Manager has its Control Plane URL, connect token and
	// trusted-keys Secret, "false" before; StatusNotConfigured then says what is missing, where.
	StatusConfigured    = "configured"
	StatusNotConfigured = "notConfigured"
	StatusLastCommand   = "lastCommand"
	// StatusDeployNamespaces and StatusImageRepositories are the cluster's own limit the Manager
	// enforces (comma-separated; empty: none), so nexoctl preflight can say when it may deploy
	// nowhere.
	StatusDeployNamespaces  = "deployNamespaces"
	StatusImageRepositories = "imageRepositories"
)

// Leader election.
const (
	// ManagerLease makes one Manager active at a time.
	ManagerLease = "nexo-manager"
	// OperatorLeaderElectionID is the operator's leader-election Lease.
	OperatorLeaderElectionID = "nexo-operator.nexo.io"
)

// Field managers of server-side applies.
const (
	ManagerFieldManager = "nexo-manager"
)

// Labels and annotations on Nexo objects.
const (
	// OwnerLabel marks objects the Manager created; its value is the installation's owner id.
	OwnerLabel = "nexo.io/owner"
	// AdoptAnnotation on a legacy object, with the Manager's adoption gate open, lets a deploy
	// take the object over.
	AdoptAnnotation = "nexo.io/adopt"

	// ManagedByLabel = ManagedByControlPlane marks a Control-Plane managed resource. It is not
	// signed: the signature annotations, not the label, decide whether an object is verified.
	ManagedByLabel        = "nexo.io/managed-by"
	ManagedByControlPlane = "control-plane"
	SignatureAnnotation   = "nexo.io/signature"
	KeyIDAnnotation       = "nexo.io/signing-key-id"
	AudienceAnnotation    = "nexo.io/signature-audience"
	RevisionAnnotation    = "nexo.io/signature-revision"

	// ProxyLabel names the NexoProxy a generated child belongs to (the operator writes it,
	// nexoctl status and support-bundle select by it).
	ProxyLabel = "nexo.io/proxy"

	// PartOfLabel and PartOf mark every object an installation creates at run time.
	PartOfLabel = "app.kubernetes.io/part-of"
	PartOf      = "nexo-edge"
)

// RegistryCredentialLabel = "true" is the installer's mark on a Secret of the operator namespace
// that proxies may use as an image-pull Secret (chart, nexoctl install --registry-secret). Only
// Secrets that carry it and have a registry type are ever copied into a proxy namespace.
const RegistryCredentialLabel = "nexo.io/registry-credential"

package manager

import "strings"

// Install sources, as reported in heartbeats (protocol.Heartbeat.InstalledBy).
const (
	InstalledByOLM       = "olm"
	InstalledByHelm      = "helm"
	InstalledByKustomize = "kustomize"
)

// chartName is the Helm chart's name, the prefix of its helm.sh/chart label.
const chartName = "nexo-edge"

// installedBundle reads the installed bundle version, and what installed it, from the labels of
// the nexo-operator Deployment: the metadata the installer itself wrote there, not a constant of
// this build. OLM labels the Deployments of a CSV with olm.owner=<csv name> (nexo-operator.v0.2.0),
// the chart with helm.sh/chart=nexo-edge-<version>; a kustomize install carries only
// app.kubernetes.io/version. The Manager needs no right on Helm release Secrets or on CSVs for this.
func installedBundle(labels map[string]string) (version, by string) {
	if csv := labels["olm.owner"]; csv != "" && (labels["olm.owner.kind"] == "" || labels["olm.owner.kind"] == "ClusterServiceVersion") {
		if i := strings.LastIndex(csv, ".v"); i >= 0 && i+2 < len(csv) {
			return csv[i+2:], InstalledByOLM
		}
		return labels["app.kubernetes.io/version"], InstalledByOLM
	}
	if v, ok := strings.CutPrefix(labels["helm.sh/chart"], chartName+"-"); ok && v != "" {
		return v, InstalledByHelm
	}
	if v := labels["app.kubernetes.io/version"]; v != "" {
		return v, InstalledByKustomize
	}
	return "", ""
}

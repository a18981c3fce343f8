package manager

import "testing"

func TestInstalledBundle(t *testing.T) {
	for _, tc := range []struct {
		name        string
		labels      map[string]string
		version, by string
	}{
		{"olm", map[string]string{"olm.owner": "nexo-operator.v0.2.1", "olm.owner.kind": "ClusterServiceVersion", "app.kubernetes.io/version": "0.2.0"}, "0.2.1", InstalledByOLM},
		{"olm without kind label", map[string]string{"olm.owner": "nexo-operator.v0.3.0-rc.1"}, "0.3.0-rc.1", InstalledByOLM},
		{"olm owner that is not a CSV", map[string]string{"olm.owner": "x.v9", "olm.owner.kind": "Other", "app.kubernetes.io/version": "0.2.0"}, "0.2.0", InstalledByKustomize},
		{"helm", map[string]string{"helm.sh/chart": "nexo-edge-0.2.0", "app.kubernetes.io/version": "0.1.9"}, "0.2.0", InstalledByHelm},
		{"helm prerelease", map[string]string{"helm.sh/chart": "nexo-edge-0.3.0-rc.1"}, "0.3.0-rc.1", InstalledByHelm},
		{"kustomize", map[string]string{"app.kubernetes.io/version": "0.2.0"}, "0.2.0", InstalledByKustomize},
		{"nothing", map[string]string{"app": "nexo-operator"}, "", ""},
		{"malformed chart label", map[string]string{"helm.sh/chart": "nexo-edge-", "app.kubernetes.io/version": "0.2.0"}, "0.2.0", InstalledByKustomize},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, by := installedBundle(tc.labels)
			if v != tc.version || by != tc.by {
				t.Errorf("installedBundle(%v) = %q, %q; want %q, %q", tc.labels, v, by, tc.version, tc.by)
			}
		})
	}
}

package preflight

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/nexo-io/nexo-edge/catalog"
)

// The server version check refuses a cluster older than the catalog's minimum and says why the
// minimum is what it is; a cluster at the minimum or newer passes. (A unit test: a real API
// server here is always newer than the minimum.)
func TestServerVersionCheckSaysWhyTheMinimum(t *testing.T) {
	for gitVersion, pass := range map[string]bool{
		"v1.29.9":        false,
		"v1.28.0+k3s1":   false,
		"v1.30.0":        true,
		"v1.37.2-eks-ab": true,
	} {
		d := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}, FakedServerVersion: &version.Info{GitVersion: gitVersion}}
		out := checkVersion(context.Background(), &Env{Discovery: d})
		if pass != (out.Status == OK) {
			t.Errorf("%s: %+v", gitVersion, out)
		}
		if !pass && (!strings.Contains(out.Message, catalog.MinKubernetesVersion) || !strings.Contains(out.Message, "ValidatingAdmissionPolicy v1")) {
			t.Errorf("%s: the refusal does not say the minimum and why: %q", gitVersion, out.Message)
		}
	}
}

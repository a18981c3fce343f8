package preflight

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

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

// An operator of a released version is judged by that release's support matrix (embedded from
// releases/), not by this build's; a version no release names is said to be unknown. (A unit
// test: only the operator Deployment's version label is read.)
func TestOperatorOfAnotherVersionIsJudgedByItsRelease(t *testing.T) {
	for version, want := range map[string]string{
		"0.2.0":              "operator 0.2.0 reconciles 18 kinds; 6 are schema-only",
		catalog.BuildVersion: "operator " + catalog.BuildVersion + " reconciles 18 kinds; 6 are schema-only",
		"9.9.9":              "operator version 9.9.9 is not in nexoctl " + catalog.BuildVersion + "'s support matrix",
	} {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "nexo-operator", Namespace: "nexo-system",
			Labels: map[string]string{"app.kubernetes.io/name": "nexo-operator", "app.kubernetes.io/version": version}}}
		c := fake.NewClientBuilder().WithObjects(d).Build()
		out := checkOperatorVersion(context.Background(), &Env{Client: c, Namespace: "nexo-system"})
		if out.Message != want {
			t.Errorf("operator %s: %q, want %q", version, out.Message, want)
		}
	}
	if _, ok := SupportMatrix["0.2.0"]; !ok {
		t.Error("releases/0.2.0 is not in the support matrix")
	}
}

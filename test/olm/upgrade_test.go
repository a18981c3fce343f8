package olm_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/contract/signature"
	"github.com/nexo-io/nexo-edge/contract/wire"
	"github.com/nexo-io/nexo-edge/controllers/render"
	"github.com/nexo-io/nexo-edge/controlplane"
	"github.com/nexo-io/nexo-edge/hack/releasebuild"
	"github.com/nexo-io/nexo-edge/nexoctl/installcmd"
	"github.com/nexo-io/nexo-edge/preflight/upgrade"
	"github.com/nexo-io/nexo-edge/test/framework/testcluster"
	"github.com/nexo-io/nexo-edge/test/framework/testinstall"
)

// TestUpgrade: the release this build's CSV replaces, installed through OLM from the catalog
// (startingCSV), with its operator and Manager built from the release's source commit and a
// signed proxy Ready; then the upgrade OLM offers, approved through its InstallPlan, as
// docs/upgrade.md says: the preflight first (it names the trusted-keys Secret OLM deletes with
// the old CSV), nexoctl install to save the keys, and nexoctl install again once the new CSV
// Succeeded. Afterwards the trusted keys are the ones from before (the Control Plane's and one
// added by hand), the proxy is Ready under this build's operator, its Deployment is the same
// object at the same generation (nothing rolled while the keys were missing), and this build's
// Manager reports its version.
func TestUpgrade(t *testing.T) {
	prevBundle := replacedBundle()
	if prevBundle == "" {
		t.Fatal("this build's CSV replaces no release: nothing to upgrade from")
	}
	root := testcluster.RepoRoot()
	from, err := releasebuild.Previous(root, catalog.BuildVersion)
	if err != nil || from == "" {
		t.Fatalf("previous release: %q %v", from, err)
	}
	old, err := releasebuild.Build(root, from, t.TempDir(), "operator", "manager")
	if err != nil {
		t.Fatal(err)
	}
	c := newOLMCluster(t)
	ctx := c.ctx
	c.subscribe(nil, "nexo-operator.v"+from, c.controlPlaneEnv())
	c.waitCSV("nexo-operator.v" + from)
	c.secrets("shop")
	license := "--license-public-key=" + c.path("license-authority.pem")
	op := c.start(wire.OperatorName, old["operator"], license)
	mgr := c.start(wire.ManagerName, old["manager"])
	proxy := c.deploy("shop")

	// The keys before: the Control Plane's, which the old Manager wrote, and one an installer
	// added by hand.
	keysKey := types.NamespacedName{Namespace: installNS, Name: wire.TrustedKeysSecret}
	keys := &corev1.Secret{}
	if err := c.k8s.Get(ctx, keysKey, keys); err != nil {
		t.Fatal(err)
	}
	if keys.Data == nil {
		keys.Data = map[string][]byte{}
	}
	handPub, _, _ := ed25519.GenerateKey(rand.Reader)
	keys.Data["installer-added.pem"] = signature.MarshalPublicKey(handPub)
	if err := c.k8s.Update(ctx, keys); err != nil {
		t.Fatal(err)
	}
	keysBefore := maps.Clone(keys.Data)
	if len(keysBefore) < 2 {
		t.Fatalf("the trusted-keys Secret holds %d entries before the upgrade, want the Control Plane's and the installer's", len(keysBefore))
	}
	dep := &appsv1.Deployment{}
	if err := c.k8s.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "orders-proxy"}, dep); err != nil {
		t.Fatal(err)
	}
	// The proxy rolls once in the upgrade when this build renders another runtime contract than
	// the release it upgrades (docs/upgrade.md, "0.2.0 to 0.3.0"); otherwise not at all.
	running, err := testinstall.RuntimeContract(ctx, c.k8s, "shop", "orders-proxy")
	if err != nil {
		t.Fatal(err)
	}
	wantGeneration := dep.Generation
	if running != render.ContractVersion {
		wantGeneration++
	}

	// Before approving: the preflight says the Secret goes with the old CSV, and what to do.
	check, err := upgrade.CheckTrustedKeys(ctx, c.k8s, installNS)
	if err != nil {
		t.Fatal(err)
	}
	if check.OK || !strings.Contains(check.Message, "ClusterServiceVersion nexo-operator.v"+from) || !strings.Contains(check.Message, "Before approving the upgrade run `nexoctl install") {
		t.Fatalf("preflight on %s's bundle Secret: %+v", from, check)
	}

	// The documented step before approving: nexoctl install saves the keys OLM will delete.
	did, err := installcmd.EnsureTrustedKeys(ctx, c.k8s, installNS, time.Minute)
	if err != nil || !strings.HasPrefix(did, fmt.Sprintf("saved %d keys", len(keysBefore))) {
		t.Fatalf("nexoctl install before the upgrade: %q %v", did, err)
	}

	// Watch the proxy through the upgrade.
	var mu sync.Mutex
	var notReady, keyHistory []string
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			ks := &corev1.Secret{}
			err := c.k8s.Get(ctx, keysKey, ks)
			seen := fmt.Sprintf("%v owners %v labels %v deleting %v", err, ks.OwnerReferences, ks.Labels, ks.DeletionTimestamp)
			mu.Lock()
			if len(keyHistory) == 0 || keyHistory[len(keyHistory)-1] != seen {
				keyHistory = append(keyHistory, seen)
			}
			mu.Unlock()
			p := &nexov1alpha1.NexoProxy{}
			if c.k8s.Get(ctx, client.ObjectKeyFromObject(proxy), p) == nil {
				if r := meta.FindStatusCondition(p.Status.Conditions, nexov1alpha1.ConditionReady); r == nil || r.Status != metav1.ConditionTrue {
					mu.Lock()
					notReady = append(notReady, fmt.Sprintf("%v", p.Status.Conditions))
					mu.Unlock()
				}
			}
		}
	}()

	// The upgrade: OLM offers this build in a new InstallPlan; approve it.
	next := "nexo-operator.v" + catalog.BuildVersion
	c.waitCSV(next)
	poll(t, "OLM deletes the replaced CSV", 2*time.Minute, c.logs, func() (bool, string) {
		err := c.k8s.Get(ctx, client.ObjectKey{Namespace: installNS, Name: "nexo-operator.v" + from}, &operatorsv1alpha1.ClusterServiceVersion{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	mgr.Stop()
	op.Stop()
	// The documented step after the CSV Succeeded: nexoctl install again, which waits until OLM
	// has deleted the old Secret (garbage collection can lag the CSV) and puts the saved keys
	// back.
	if did, err = installcmd.EnsureTrustedKeys(ctx, c.k8s, installNS, 2*time.Minute); err != nil || !strings.Contains(did, "saved before the upgrade") {
		t.Fatalf("nexoctl install after the upgrade: %q %v", did, err)
	}
	if err := c.k8s.Get(ctx, keysKey, keys); err != nil || !maps.EqualFunc(keys.Data, keysBefore, bytes.Equal) || upgrade.CSVOwner(keys) != "" {
		t.Fatalf("after the upgrade the trusted keys are %d entries (owners %v), want the %d from before: %v", len(keys.Data), keys.OwnerReferences, len(keysBefore), err)
	}
	if err := c.k8s.Get(ctx, client.ObjectKey{Namespace: installNS, Name: wire.TrustedKeysSavedSecret}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("the saved copy of the keys is still there after they were put back: %v", err)
	}
	c.start(wire.OperatorName, bins["operator"], license)
	c.start(wire.ManagerName, bins["manager"])
	poll(t, "this build's Manager reports its version", time.Minute, c.logs, func() (bool, string) {
		var v controlplane.EnvironmentView
		if err := json.Unmarshal([]byte(c.cp("env", "show", c.envID)), &v); err != nil {
			return false, err.Error()
		}
		return v.Inventory.BundleVersion == catalog.BuildVersion && strings.HasPrefix(v.Inventory.ManagerVersion, catalog.BuildVersion), v.Inventory.BundleVersion + " " + v.Inventory.ManagerVersion
	})
	// The new operator has re-verified the proxy (its observedGeneration), applied what this
	// build renders (one rollout when the runtime contract changed) and it is Ready on it.
	poll(t, "the proxy is Ready under this build's operator", time.Minute, c.logs, func() (bool, string) {
		p := &nexov1alpha1.NexoProxy{}
		if err := c.k8s.Get(ctx, client.ObjectKeyFromObject(proxy), p); err != nil {
			return false, err.Error()
		}
		d := &appsv1.Deployment{}
		if err := c.k8s.Get(ctx, client.ObjectKeyFromObject(dep), d); err != nil {
			return false, err.Error()
		}
		r := meta.FindStatusCondition(p.Status.Conditions, nexov1alpha1.ConditionReady)
		return p.Status.Phase == nexov1alpha1.ProxyReady && r != nil && r.Status == metav1.ConditionTrue && d.Generation >= wantGeneration &&
				p.Status.AvailableRevision == d.Spec.Template.Annotations[render.GraphRevisionKey],
			fmt.Sprintf("generation %d (want %d), available revision %s, template revision %s, %v", d.Generation, wantGeneration, p.Status.AvailableRevision, d.Spec.Template.Annotations[render.GraphRevisionKey], p.Status.Conditions)
	})
	close(stop)
	<-watched
	t.Logf("the proxy was seen not Ready %d times while the trusted-keys Secret was gone; the Secret changed %d times during the upgrade", len(notReady), len(keyHistory))
	// The Manager keeps the Control Plane's entries; the installer's key is still there.
	if err := c.k8s.Get(ctx, keysKey, keys); err != nil || !maps.EqualFunc(keys.Data, keysBefore, bytes.Equal) {
		t.Errorf("trusted keys after the upgrade: %d entries, want the %d from before: %v", len(keys.Data), len(keysBefore), err)
	}
	after := &appsv1.Deployment{}
	if err := c.k8s.Get(ctx, client.ObjectKeyFromObject(dep), after); err != nil {
		t.Fatal(err)
	}
	if after.UID != dep.UID || after.Generation != wantGeneration {
		t.Errorf("the proxy Deployment in the upgrade: UID %s→%s, generation %d→%d, want the same object at generation %d (runtime contract %q → %q)",
			dep.UID, after.UID, dep.Generation, after.Generation, wantGeneration, running, render.ContractVersion)
	}
}

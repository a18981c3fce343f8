package upgrade

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nexo-io/nexo-edge/contract/wire"
)

// TrustedKeys is what happens to the trusted-keys Secret in an OLM upgrade. Bundles before 0.3.0
// shipped it, so OLM made it a dependent of the CSV that installed it. During the upgrade OLM
// applies that bundle Secret again (empty, owned by the old CSV, whatever was changed since) and
// then deletes it with the old CSV: the operator trusts no key until it is created again, which
// nexoctl install does with the keys it saved before the upgrade (docs/upgrade.md, "OLM").
type TrustedKeys struct {
	OK      bool   `json:"ok"`
	Message string `json:"message"`
}

// CheckTrustedKeys reads the trusted-keys Secret in ns.
func CheckTrustedKeys(ctx context.Context, c client.Client, ns string) (TrustedKeys, error) {
	s := &corev1.Secret{}
	key := types.NamespacedName{Namespace: ns, Name: wire.TrustedKeysSecret}
	if err := c.Get(ctx, key, s); err != nil {
		if apierrors.IsNotFound(err) {
			return TrustedKeys{Message: fmt.Sprintf("the trusted-keys Secret %s does not exist: no signed object can be verified; create it (kubectl -n %s create secret generic %s) and the Manager fills it", key, ns, key.Name)}, nil
		}
		return TrustedKeys{}, err
	}
	if owner := CSVOwner(s); owner != "" {
		return TrustedKeys{Message: fmt.Sprintf("the trusted-keys Secret %s (%d keys) came with the bundle of ClusterServiceVersion %s: OLM deletes it, keys and all, with that CSV during the upgrade, "+
			"and signed proxies report UnknownSigningKey (their workloads keep running) until it exists again. Before approving the upgrade run `nexoctl install --token-file <token>`: it saves the keys in %s; "+
			"run it again once the new CSV has Succeeded: it creates %s with them", key, len(s.Data), owner, wire.TrustedKeysSavedSecret, key.Name)}, nil
	}
	return TrustedKeys{OK: true, Message: fmt.Sprintf("%d keys in %s, which no CSV owns: the upgrade keeps them", len(s.Data), key)}, nil
}

// CSVOwner is the name of the ClusterServiceVersion that owns s (OLM made a bundle's Secret its
// CSV's dependent), or "".
func CSVOwner(s *corev1.Secret) string {
	for _, r := range s.OwnerReferences {
		if r.Kind == "ClusterServiceVersion" {
			return r.Name
		}
	}
	return ""
}

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
// shipped it, so OLM made it a dependent of the CSV that installed it; when the upgrade deletes
// that CSV, the garbage collector deletes the Secret, and the operator then trusts no key. The
// new Manager removes the reference before it is Ready (OLM deletes the old CSV only after
// that), and the preflight names the command that does it by hand, to be certain.
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
	for _, r := range s.OwnerReferences {
		if r.Kind == "ClusterServiceVersion" {
			return TrustedKeys{Message: fmt.Sprintf("the trusted-keys Secret %s (%d keys) is owned by ClusterServiceVersion %s: when the upgrade deletes that CSV, it is deleted too. "+
				"The new Manager removes the reference before it is Ready; to be certain, before approving the InstallPlan run: "+
				`kubectl -n %s patch secret %s --type=json -p '[{"op":"remove","path":"/metadata/ownerReferences"}]'`, key, len(s.Data), r.Name, ns, key.Name)}, nil
		}
	}
	return TrustedKeys{OK: true, Message: fmt.Sprintf("%d keys in %s, which no CSV owns: the upgrade keeps them", len(s.Data), key)}, nil
}

// Package fingerprint computes the schema fingerprint of the nexo.io CRDs: what nexoctl
// preflight compares with this build's own and what the Manager reports in its heartbeat. It is
// a leaf (the CRD types, the catalog and the embedded CRDs), so the Manager links neither
// preflight nor its terminal rendering to compute it.
package fingerprint

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/config/crd"
)

// NexoCRDs lists the installed CRDs of the nexo.io group.
func NexoCRDs(ctx context.Context, c client.Reader) ([]apiextensionsv1.CustomResourceDefinition, error) {
	var list apiextensionsv1.CustomResourceDefinitionList
	if err := c.List(ctx, &list); err != nil {
		return nil, err
	}
	var out []apiextensionsv1.CustomResourceDefinition
	for _, crd := range list.Items {
		if crd.Spec.Group == catalog.Group {
			out = append(out, crd)
		}
	}
	return out, nil
}

// Of is the schema fingerprint of a set of CRDs: a sha256 over the canonical JSON of
// each CRD's spec (encoding/json sorts map keys and has no insignificant whitespace), in order
// of CRD name, plus one hash per kind so a mismatch can name the kinds that differ. The Manager
// reports the same function's result.
func Of(crds []apiextensionsv1.CustomResourceDefinition) (total string, perKind map[string]string) {
	sort.Slice(crds, func(i, j int) bool { return crds[i].Name < crds[j].Name })
	h := sha256.New()
	perKind = map[string]string{}
	for _, c := range crds {
		spec := c.Spec
		spec.Conversion = nil // the API server fills in the default strategy
		raw, _ := json.Marshal(spec)
		sum := sha256.Sum256(raw)
		perKind[c.Spec.Names.Kind] = hex.EncodeToString(sum[:])
		h.Write([]byte(c.Name + "\x00"))
		h.Write(sum[:])
	}
	return hex.EncodeToString(h.Sum(nil)), perKind
}

// Expected is the fingerprint of the CRDs this build ships (config/crd, embedded).
func Expected() (string, map[string]string, error) {
	byKind, err := crd.ByKind()
	if err != nil {
		return "", nil, err
	}
	list := make([]apiextensionsv1.CustomResourceDefinition, 0, len(byKind))
	for _, c := range byKind {
		list = append(list, *c.DeepCopy())
	}
	total, perKind := Of(list)
	return total, perKind, nil
}

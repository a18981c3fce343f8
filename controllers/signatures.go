// The signature check every controller runs on the objects it reconciles (docs/security.md,
// "Managed-resource signatures").

package controllers

import (
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/contract/signature"
)

// checkSignature sets SignatureValid on managed objects (and on every object when signatures are
// required) and returns the failure, if any. An object is managed when it carries the managed-by
// label or any signature annotation, or once carried a signature the operator accepted
// (status.signedRevision): removing the unsigned label, or the whole signature, never turns a
// signed object into an unverified one. A valid signature whose revision is lower than the last
// accepted one is a replay. Unmanaged objects without the requirement carry no SignatureValid
// condition.
func checkSignature(obj nexov1alpha1.Object, keys *TrustedKeys, require bool) *invalid {
	st := obj.NexoStatus()
	wasSigned := st.SignedRevision > 0
	if !signature.IsManaged(obj.GetLabels(), obj.GetAnnotations()) && !wasSigned && !require {
		return nil
	}
	signed, err := signature.Verify(obj, keys.Get(), keys.EnvironmentID())
	if err == nil && signed.Revision < st.SignedRevision {
		err = errReplayed
	}
	if err == nil {
		st.SignedRevision = signed.Revision
		setCondition(obj, nexov1alpha1.ConditionSignatureValid, metav1.ConditionTrue, nexov1alpha1.ReasonSigned,
			fmt.Sprintf("signed by trusted key %s for environment %s, revision %d", signed.KeyID, signed.Audience, signed.Revision))
		return nil
	}
	bad := &invalid{nexov1alpha1.ReasonSignatureMismatch, err.Error()}
	switch {
	case errors.Is(err, errReplayed):
		bad = &invalid{nexov1alpha1.ReasonSignatureReplayed, fmt.Sprintf("signature revision %d is older than revision %d, which was already accepted for this object: an older manifest was re-applied; the Control Plane must send the current one",
			signed.Revision, st.SignedRevision)}
	case errors.Is(err, signature.ErrUnsigned) && wasSigned && !signature.HasSignature(obj.GetAnnotations()):
		bad = &invalid{nexov1alpha1.ReasonUnsigned, fmt.Sprintf("this object was signed by the Control Plane (revision %d) and its signature was removed; only the Manager may change it: re-deploy it from the Control Plane", st.SignedRevision)}
	case errors.Is(err, signature.ErrUnsigned):
		bad = &invalid{nexov1alpha1.ReasonUnsigned, "not signed: " + err.Error() + "; sign it with `nexoctl sign` or remove the nexo.io/managed-by label"}
		if !signature.IsManaged(obj.GetLabels(), obj.GetAnnotations()) {
			bad.message = "the operator runs with --require-signatures and this object is not signed; sign it with `nexoctl sign`"
		}
	case errors.Is(err, signature.ErrUnknownKey):
		bad = &invalid{nexov1alpha1.ReasonUnknownSigningKey, err.Error() + "; add the Control Plane's public key to the trusted-keys Secret"}
	case errors.Is(err, signature.ErrAudience):
		bad = &invalid{nexov1alpha1.ReasonWrongAudience, err.Error() + "; a manifest is accepted only by the environment it was signed for (the operator's --environment-id, or environmentID in its namespace's ConfigMap nexo-manager-config)"}
	}
	setCondition(obj, nexov1alpha1.ConditionSignatureValid, metav1.ConditionFalse, bad.reason, bad.message)
	return bad
}

// SignatureVerdict applies the signature check to obj (setting SignatureValid where it applies)
// and returns the failure reason, or "" when obj may be used.
func SignatureVerdict(obj nexov1alpha1.Object, keys *TrustedKeys, require bool) string {
	if bad := checkSignature(obj, keys, require); bad != nil {
		return bad.reason
	}
	return ""
}

package controllers

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/contract/license"
)

// NexoLicense index and recheck bound.
const (
	indexLicenseSecret       = "spec.secretRef.name"
	maxLicenseRecheckSeconds = 12 * 3600
)

// LicenseReconciler verifies NexoLicenses. The license document is read straight from the API
// server (Secrets are not cached in full) and only its verified claims reach status.
type LicenseReconciler struct {
	client.Client
	APIReader         client.Reader
	LicenseKeys       map[string]ed25519.PublicKey
	Keys              *TrustedKeys
	RequireSignatures bool
	Now               func() time.Time
	KeysChanged       chan event.GenericEvent
}

// SetupWithManager registers the controller, an index on the referenced Secret and a
// metadata-only Secret watch.
func (r *LicenseReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &nexov1alpha1.NexoLicense{}, indexLicenseSecret, func(o client.Object) []string {
		return []string{o.(*nexov1alpha1.NexoLicense).Spec.SecretRef.Name}
	}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("nexolicenses").
		For(&nexov1alpha1.NexoLicense{}, builder.WithPredicates(specOrSignatureChanged())).
		WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.licensesForSecret)).
		WatchesRawSource(source.Channel(r.KeysChanged, &handler.EnqueueRequestForObject{})).
		Complete(r)
}

func (r *LicenseReconciler) licensesForSecret(ctx context.Context, secret client.Object) []reconcile.Request {
	var list nexov1alpha1.NexoLicenseList
	if err := r.List(ctx, &list, client.InNamespace(secret.GetNamespace()), client.MatchingFields{indexLicenseSecret: secret.GetName()}); err != nil {
		return nil
	}
	out := make([]reconcile.Request, len(list.Items))
	for i, l := range list.Items {
		out[i] = reconcile.Request{NamespacedName: types.NamespacedName{Namespace: l.Namespace, Name: l.Name}}
	}
	return out
}

// Reconcile verifies one license.
func (r *LicenseReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	lic := &nexov1alpha1.NexoLicense{}
	if err := r.Get(ctx, req.NamespacedName, lic); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := lic.DeepCopy()
	recheck, err := r.evaluate(ctx, lic)
	if err != nil {
		return ctrl.Result{}, err
	}
	lic.Status.ObservedGeneration = lic.Generation
	if err := writeStatus(ctx, r.Client, before, lic); err != nil {
		return statusConflict(ctx, err)
	}
	return ctrl.Result{RequeueAfter: recheck}, nil
}

// evaluate sets the license's status and returns when it must be looked at again (expiry).
func (r *LicenseReconciler) evaluate(ctx context.Context, lic *nexov1alpha1.NexoLicense) (time.Duration, error) {
	notReady := func(reason, msg string) (time.Duration, error) {
		lic.Status.Licensee, lic.Status.ExpiresAt, lic.Status.Entitlements, lic.Status.MaxProxies, lic.Status.DocumentID = "", nil, nil, 0, ""
		setCondition(lic, nexov1alpha1.ConditionReady, metav1.ConditionFalse, reason, msg)
		return 0, nil
	}
	if bad := checkSignature(lic, r.Keys, r.RequireSignatures); bad != nil {
		return notReady(bad.reason, bad.message)
	}
	ref := lic.Spec.SecretRef
	secret := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: lic.Namespace, Name: ref.Name}, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return notReady(nexov1alpha1.ReasonSecretNotFound, fmt.Sprintf("Secret %s not found in namespace %s; create it with the license document under key %q", ref.Name, lic.Namespace, ref.Key))
		}
		return 0, err
	}
	doc, ok := secret.Data[ref.Key]
	if !ok {
		return notReady(nexov1alpha1.ReasonSecretKeyMissing, fmt.Sprintf("Secret %s has no key %q; put the license document under that key", ref.Name, ref.Key))
	}
	claims, err := license.Parse(string(doc), r.LicenseKeys)
	if err != nil {
		reason := nexov1alpha1.ReasonLicenseMalformed
		switch {
		case errors.Is(err, license.ErrUnknownKey):
			reason = nexov1alpha1.ReasonLicenseUnknownKey
		case errors.Is(err, license.ErrSignature):
			reason = nexov1alpha1.ReasonLicenseBadSig
		}
		return notReady(reason, err.Error()+"; request a new license document from Nexo")
	}
	if want := lic.Spec.ExpectedLicensee; want != "" && want != claims.Licensee {
		return notReady(nexov1alpha1.ReasonLicenseeMismatch, fmt.Sprintf("the license is issued to %q, but spec.expectedLicensee is %q", claims.Licensee, want))
	}
	entitlements := slices.Clone(claims.Entitlements)
	slices.Sort(entitlements)
	expires := metav1.NewTime(claims.ExpiresAt.UTC().Truncate(time.Second))
	lic.Status.Licensee, lic.Status.ExpiresAt, lic.Status.Entitlements, lic.Status.MaxProxies = claims.Licensee, &expires, entitlements, claims.MaxProxies
	lic.Status.DocumentID = license.DocumentID(string(doc))

	now := r.Now()
	renewBefore, _ := time.ParseDuration(string(lic.Spec.RenewBefore))
	left := claims.ExpiresAt.Sub(now)
	switch {
	case left <= 0:
		setCondition(lic, nexov1alpha1.ConditionReady, metav1.ConditionFalse, nexov1alpha1.ReasonLicenseExpired,
			fmt.Sprintf("the license expired at %s; install a renewed license document", expires.Format(time.RFC3339)))
		return 0, nil
	case left <= renewBefore:
		setCondition(lic, nexov1alpha1.ConditionReady, metav1.ConditionTrue, nexov1alpha1.ReasonLicenseExpiring,
			fmt.Sprintf("the license expires at %s; renew it before then", expires.Format(time.RFC3339)))
		return min(left, maxLicenseRecheckSeconds*time.Second), nil
	default:
		setCondition(lic, nexov1alpha1.ConditionReady, metav1.ConditionTrue, nexov1alpha1.ReasonLicenseValid,
			fmt.Sprintf("licensed to %s until %s for %d proxies", claims.Licensee, expires.Format(time.RFC3339), claims.MaxProxies))
		return min(left-renewBefore, maxLicenseRecheckSeconds*time.Second), nil
	}
}

package installcmd

import (
	"context"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nexo-io/nexo-edge/contract/wire"
	"github.com/nexo-io/nexo-edge/nexoctl/cliopts"
	"github.com/nexo-io/nexo-edge/preflight/upgrade"
)

// EnsureTrustedKeys makes sure the trusted-keys Secret of an OLM install exists and keeps its
// keys across an OLM upgrade (docs/upgrade.md, "OLM"). Bundles before 0.3.0 shipped the Secret,
// so OLM made it a dependent of their CSV and deletes it, keys and all, with that CSV during the
// upgrade. Run before the upgrade is approved, it saves the keys in TrustedKeysSavedSecret (which
// no CSV owns); run after it, it waits (up to wait) until OLM has deleted the old Secret, creates
// it again with the saved keys and removes the saved copy. Without a CSV owner it creates the
// Secret when missing and leaves an existing one as it is. It returns what it did, in words.
func EnsureTrustedKeys(ctx context.Context, c client.Client, ns string, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	var did string
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		did, err = ensureTrustedKeysOnce(ctx, c, ns, deadline)
		return did != "" || err != nil, err
	})
	return did, err
}

// ensureTrustedKeysOnce is one look of EnsureTrustedKeys: what it did, or "" to look again.
func ensureTrustedKeysOnce(ctx context.Context, c client.Client, ns string, deadline time.Time) (string, error) {
	key := client.ObjectKey{Namespace: ns, Name: wire.TrustedKeysSecret}
	saved, err := readSaved(ctx, c, ns)
	if err != nil {
		return "", err
	}
	s := &corev1.Secret{}
	err = c.Get(ctx, key, s)
	switch {
	case apierrors.IsNotFound(err):
		s = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: ns, Labels: map[string]string{wire.PartOfLabel: wire.PartOf}},
			Type: corev1.SecretTypeOpaque, Data: saved}
		if err := c.Create(ctx, s); apierrors.IsAlreadyExists(err) {
			return "", nil // created meanwhile: look again
		} else if err != nil {
			return "", cliopts.Fail(cliopts.ExitFailed, "create Secret %s: %s", key, apierrors.ReasonForError(err))
		}
		if saved == nil {
			return "created", nil
		}
		return fmt.Sprintf("created with the %d keys saved before the upgrade", len(saved)), dropSaved(ctx, c, ns)
	case err != nil:
		return "", cliopts.Fail(cliopts.ExitFailed, "read Secret %s: %s", key, apierrors.ReasonForError(err))
	}
	owner := upgrade.CSVOwner(s)
	if owner == "" {
		if saved == nil {
			return "kept", nil
		}
		// Created again by someone else (kubectl, the Control Plane's install command):
		// add the saved keys it lacks.
		added := 0
		for name, v := range saved {
			if _, ok := s.Data[name]; !ok {
				if s.Data == nil {
					s.Data = map[string][]byte{}
				}
				s.Data[name], added = v, added+1
			}
		}
		if added > 0 {
			if err := c.Update(ctx, s); err != nil {
				return "", cliopts.Fail(cliopts.ExitFailed, "update Secret %s: %s", key, apierrors.ReasonForError(err))
			}
		}
		return fmt.Sprintf("kept; %d keys saved before the upgrade added back", added), dropSaved(ctx, c, ns)
	}
	replaced, err := csvReplaced(ctx, c, ns, owner)
	if err != nil {
		return "", err
	}
	if !replaced {
		// Before the upgrade: keep a copy of every key, the saved ones included (OLM may
		// already have emptied the Secret in an upgrade that was tried before).
		merged := maps.Clone(saved)
		if merged == nil {
			merged = map[string][]byte{}
		}
		maps.Copy(merged, s.Data)
		if err := writeSaved(ctx, c, ns, merged); err != nil {
			return "", err
		}
		return fmt.Sprintf("saved %d keys in %s: ClusterServiceVersion %s owns %s and OLM deletes it in the upgrade; run nexoctl install again once the new CSV has Succeeded", len(merged), wire.TrustedKeysSavedSecret, owner, key.Name), nil
	}
	// The upgrade is under way: OLM deletes the old Secret with the old CSV.
	if time.Now().After(deadline) {
		return "", cliopts.Fail(cliopts.ExitFailed, "Secret %s still belongs to ClusterServiceVersion %s, which is being replaced; run nexoctl install again once OLM has deleted it (kubectl -n %s get secret %s)", key, owner, ns, key.Name)
	}
	return "", nil
}

// csvReplaced reports whether the CSV name in ns is gone, being deleted, or replaced by another
// CSV (the upgrade was approved).
func csvReplaced(ctx context.Context, c client.Client, ns, name string) (bool, error) {
	list := &unstructured.UnstructuredList{}
	list.SetAPIVersion("operators.coreos.com/v1alpha1")
	list.SetKind("ClusterServiceVersionList")
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
		return false, cliopts.Fail(cliopts.ExitFailed, "list ClusterServiceVersions in %s: %s", ns, apierrors.ReasonForError(err))
	}
	found := false
	for _, csv := range list.Items {
		if replaces, _, _ := unstructured.NestedString(csv.Object, "spec", "replaces"); replaces == name {
			return true, nil
		}
		if csv.GetName() == name {
			found = csv.GetDeletionTimestamp() == nil
		}
	}
	return !found, nil
}

func readSaved(ctx context.Context, c client.Client, ns string) (map[string][]byte, error) {
	s := &corev1.Secret{}
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: wire.TrustedKeysSavedSecret}, s)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, cliopts.Fail(cliopts.ExitFailed, "read Secret %s/%s: %s", ns, wire.TrustedKeysSavedSecret, apierrors.ReasonForError(err))
	}
	if s.Data == nil {
		return map[string][]byte{}, nil
	}
	return s.Data, nil
}

func writeSaved(ctx context.Context, c client.Client, ns string, data map[string][]byte) error {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: wire.TrustedKeysSavedSecret, Namespace: ns, Labels: map[string]string{wire.PartOfLabel: wire.PartOf}},
		Type: corev1.SecretTypeOpaque, Data: data}
	err := c.Create(ctx, s)
	if apierrors.IsAlreadyExists(err) {
		cur := &corev1.Secret{}
		if err = c.Get(ctx, client.ObjectKeyFromObject(s), cur); err == nil {
			cur.Data = data
			err = c.Update(ctx, cur)
		}
	}
	if err != nil {
		return cliopts.Fail(cliopts.ExitFailed, "save the trusted keys in Secret %s/%s: %s", ns, wire.TrustedKeysSavedSecret, apierrors.ReasonForError(err))
	}
	return nil
}

func dropSaved(ctx context.Context, c client.Client, ns string) error {
	err := c.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: wire.TrustedKeysSavedSecret, Namespace: ns}})
	if err != nil && !apierrors.IsNotFound(err) {
		return cliopts.Fail(cliopts.ExitFailed, "delete Secret %s/%s: %s", ns, wire.TrustedKeysSavedSecret, apierrors.ReasonForError(err))
	}
	return nil
}

package controllers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
)

// The license controller follows the license document's Secret: missing, then valid (its
// verified claims reach status), then replaced by something that is not a license (the claims
// go), never repeating the document.
func TestLicenseFollowsItsSecret(t *testing.T) {
	ctx := context.Background()
	ns := "licenses"
	lic := &nexov1alpha1.NexoLicense{ObjectMeta: metav1.ObjectMeta{Name: "acme", Namespace: ns},
		Spec: nexov1alpha1.NexoLicenseSpec{SecretRef: nexov1alpha1.SecretKeyReference{Name: "acme-license", Key: "license"}, ExpectedLicensee: "Acme Corp"}}
	if err := k8s.Create(ctx, lic); err != nil {
		t.Fatal(err)
	}
	waitReady(t, ns, "NexoLicense", "acme", func(c *metav1.Condition) bool { return c.Reason == nexov1alpha1.ReasonSecretNotFound })

	doc := validLicense(t)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "acme-license", Namespace: ns}, Data: map[string][]byte{"license": doc}}
	if err := k8s.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	waitReady(t, ns, "NexoLicense", "acme", func(c *metav1.Condition) bool { return c.Reason == nexov1alpha1.ReasonLicenseValid })
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(lic), lic); err != nil {
		t.Fatal(err)
	}
	if lic.Status.Licensee != "Acme Corp" || lic.Status.MaxProxies != 5 || lic.Status.ExpiresAt == nil || lic.Status.ExpiresAt.Before(&metav1.Time{Time: time.Now()}) || lic.Status.DocumentID == "" {
		t.Errorf("claims in status: %+v", lic.Status)
	}

	secret.Data["license"] = []byte("not a license")
	if err := k8s.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	c := waitReady(t, ns, "NexoLicense", "acme", func(c *metav1.Condition) bool { return c.Reason == nexov1alpha1.ReasonLicenseMalformed })
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(lic), lic); err != nil {
		t.Fatal(err)
	}
	if lic.Status.Licensee != "" || lic.Status.MaxProxies != 0 || lic.Status.DocumentID != "" {
		t.Errorf("a malformed document left claims in status: %+v", lic.Status)
	}
	if strings.Contains(c.Message, string(doc)) || strings.Contains(c.Message, "not a license") {
		t.Errorf("the message repeats the document: %s", c.Message)
	}
}

package nexoctl_test

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nexo-io/nexo-edge/contract/connecttoken"
	"github.com/nexo-io/nexo-edge/contract/wire"
	"github.com/nexo-io/nexo-edge/preflight"
	"github.com/nexo-io/nexo-edge/test/framework/testcluster"
)

// TestSupportBundleRedactsEverySecret plants a known connect token and license document where a
// bug could leak them (the Manager's status ConfigMap, an event message, an annotation in base64)
// and checks that the archive has what support needs and neither value, in any form.
func TestSupportBundleRedactsEverySecret(t *testing.T) {
	ctx := context.Background()
	c, k8s := clusterWithCRDs(t)
	token, _ := connecttoken.New("env0supp01")
	licenseDoc := "nexo-license-v1.eyJsaWNlbnNlZSI6IkFjbWUifQ.c2lnbmF0dXJl"
	samples, err := testcluster.Samples()
	if err != nil {
		t.Fatal(err)
	}
	proxy := samples["NexoProxy"]
	proxy.SetNamespace("shop")
	proxy.SetAnnotations(map[string]string{"example.com/debug": base64.StdEncoding.EncodeToString([]byte(licenseDoc))})
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "nexo-system"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: wire.ConnectTokenSecret, Namespace: "nexo-system"}, Data: map[string][]byte{"token": []byte(token)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "acme-license", Namespace: "shop"}, Data: map[string][]byte{"license": []byte(licenseDoc)}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: wire.ManagerStatusConfigMap, Namespace: "nexo-system"}, Data: map[string]string{wire.StatusLastHeartbeatResult: "401 for token " + token}},
		proxy,
		&corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "orders-proxy.1", Namespace: "shop"}, Type: "Warning", Reason: "Blocked",
			Message:        "license " + licenseDoc + " did not verify",
			InvolvedObject: corev1.ObjectReference{APIVersion: "nexo.io/v1alpha1", Kind: "NexoProxy", Namespace: "shop", Name: "orders-proxy"},
			LastTimestamp:  metav1.NewTime(time.Now())},
	} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	archive := filepath.Join(t.TempDir(), "bundle.tar.gz")
	out, errOut, code := run(t, "", "--kubeconfig", c.Kubeconfig, "support-bundle", "--file", archive)
	if code != 0 || !strings.Contains(out, "Secret values redacted") {
		t.Fatalf("support-bundle: exit %d\n%s%s", code, out, errOut)
	}
	files := readArchive(t, archive)
	for _, want := range []string{"nexo-support/objects/shop/NexoProxy/orders-proxy.yaml", "nexo-support/events/shop.txt", "nexo-support/secrets/nexo-system.txt",
		"nexo-support/components/nexo-manager/status-configmap.yaml", "nexo-support/preflight.json", "nexo-support/README.txt"} {
		if _, ok := files[want]; !ok {
			t.Errorf("the bundle has no %s", want)
		}
	}
	var report preflight.Report
	if err := json.Unmarshal([]byte(files["nexo-support/preflight.json"]), &report); err != nil || len(report.Categories) == 0 {
		t.Errorf("preflight.json: %v", err)
	}
	if !strings.Contains(files["nexo-support/events/shop.txt"], "NexoProxy/orders-proxy\tBlocked") {
		t.Errorf("the event about the proxy is missing:\n%s", files["nexo-support/events/shop.txt"])
	}
	if !strings.Contains(files["nexo-support/secrets/nexo-system.txt"], "nexo-connect-token\tOpaque\ttoken (") {
		t.Errorf("Secrets are not listed by name and key:\n%s", files["nexo-support/secrets/nexo-system.txt"])
	}
	for name, content := range files {
		for _, secret := range []string{token, licenseDoc, base64.StdEncoding.EncodeToString([]byte(token)), base64.StdEncoding.EncodeToString([]byte(licenseDoc))} {
			if strings.Contains(content, secret) {
				t.Errorf("%s contains a Secret value", name)
			}
		}
	}
	if !strings.Contains(files["nexo-support/components/nexo-manager/status-configmap.yaml"], "401 for token <redacted>") {
		t.Errorf("the leaked token was not replaced in place:\n%s", files["nexo-support/components/nexo-manager/status-configmap.yaml"])
	}
	if info, err := os.Stat(archive); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("archive mode %v (%v), want 0600", info.Mode(), err)
	}
}

func readArchive(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	out := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		out[h.Name] = string(b)
	}
}

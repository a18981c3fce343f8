package security_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/nexo-io/nexo-edge/contract/connecttoken"
	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/test/framework/testcluster"
	"github.com/nexo-io/nexo-edge/test/framework/testinstall"
)

// TestSubscriptionConfigEnvReachesTheManager runs the Manager binary the way OLM would run the
// CSV's container: its args and env, with a Subscription's config.env merged in (OLM replaces
// same-named variables and appends the others). The Control Plane URL, the proxy image and the
// owner id come only from that env, and the Manager uses all three.
func TestSubscriptionConfigEnvReachesTheManager(t *testing.T) {
	ctx := context.Background()
	csv := loadCSV(t)
	var container *corev1.Container
	for _, d := range csv.Spec.InstallStrategy.StrategySpec.DeploymentSpecs {
		if d.Name == "nexo-manager" {
			container = &d.Spec.Template.Spec.Containers[0]
		}
	}
	if container == nil {
		t.Fatal("no nexo-manager Deployment in the CSV")
	}

	// A Control Plane that records heartbeats and sends one deploy.
	var mu sync.Mutex
	var beats []protocol.Heartbeat
	cpSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/ack") {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		var hb protocol.Heartbeat
		_ = json.NewDecoder(r.Body).Decode(&hb)
		mu.Lock()
		beats = append(beats, hb)
		mu.Unlock()
		_ = json.NewEncoder(w).Encode(protocol.HeartbeatResponse{NextHeartbeatSeconds: 1})
	}))
	defer cpSrv.Close()

	subscriptionEnv := map[string]string{"NEXO_CONTROL_PLANE_URL": cpSrv.URL, "NEXO_PROXY_IMAGE": "registry.example.com/nexo/proxy:9.9.9", "NEXO_OWNER_ID": "olm-install-7"}
	env := []string{}
	for _, e := range container.Env {
		if _, overridden := subscriptionEnv[e.Name]; overridden || e.ValueFrom != nil {
			continue // replaced by config.env, or resolved by the kubelet (not here)
		}
		env = append(env, e.Name+"="+e.Value)
	}
	for k, v := range subscriptionEnv {
		env = append(env, k+"="+v)
	}

	dir := t.TempDir()
	bin := filepath.Join(dir, "manager")
	if out, err := exec.Command("go", "build", "-o", bin, filepath.Join(testcluster.RepoRoot(), "cmd", "manager")).CombinedOutput(); err != nil {
		t.Fatalf("build the Manager: %v\n%s", err, out)
	}
	saCfg, err := testinstall.Manager(ctx, cluster)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := cluster.WriteKubeconfig("olm-manager", saCfg)
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := connecttoken.New("olmenv0001")
	tokenFile := filepath.Join(dir, "token")
	_ = os.WriteFile(tokenFile, []byte(tok), 0o600)
	// The container's args as the CSV has them; the paths it mounts are files here (later flags win).
	args := append(append([]string{}, container.Args...), "--token-file="+tokenFile, "--trusted-keys-dir="+dir,
		"--namespace="+testinstall.Namespace, "--metrics-bind-address=0", "--health-probe-bind-address=0", "--leader-elect=false")
	cmd := exec.Command(bin, args...)
	cmd.Env = append(env, "KUBECONFIG="+kubeconfig, "HOME="+dir)
	logs := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() }()

	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(beats) > 0, nil
	}); err != nil {
		t.Fatalf("no heartbeat reached the URL from config.env; Manager output:\n%s", logs.String())
	}
	mu.Lock()
	hb := beats[0]
	mu.Unlock()
	if hb.ProxyImage != subscriptionEnv["NEXO_PROXY_IMAGE"] {
		t.Errorf("heartbeat proxy image %q, want the one from config.env", hb.ProxyImage)
	}
	if !strings.Contains(logs.String(), "olm-install-7") { // the start line names the owner id in use
		t.Errorf("the Manager does not use the owner id from config.env:\n%s", logs.String())
	}
}

// loadCSV reads the generated ClusterServiceVersion of the bundle.
func loadCSV(t *testing.T) *operatorsv1alpha1.ClusterServiceVersion {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testcluster.RepoRoot(), "bundle", "manifests", "nexo-operator.clusterserviceversion.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	csv := &operatorsv1alpha1.ClusterServiceVersion{}
	if err := yaml.Unmarshal(raw, csv); err != nil {
		t.Fatal(err)
	}
	return csv
}

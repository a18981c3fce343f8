// Package testcluster starts a real Kubernetes control plane on loopback for tests and the demo.
//
// Two levels:
//   - Envtest: etcd + kube-apiserver (controller-runtime envtest), enough for CRD validation and
//     controllers' writes and status.
//   - Full: the same plus kube-controller-manager, kube-scheduler and kwok with simulated nodes,
//     for garbage collection, Deployment status and Ready pods.
//
// Binaries come from KUBEBUILDER_ASSETS (etcd, kube-apiserver) when set, otherwise from the
// repository's bin/ (built by hack/build-tools.sh). Every port is chosen free on 127.0.0.1, every
// data directory lives under one temp folder, and Stop ends every process Start started.
package testcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"
)

// Mode selects how much of a cluster to start.
type Mode string

const (
	// Envtest starts etcd and kube-apiserver.
	Envtest Mode = "envtest"
	// Full adds kube-controller-manager, kube-scheduler and kwok with simulated nodes.
	Full Mode = "full"
)

// Node describes a simulated node (Full mode).
type Node struct {
	Name   string
	Region string
	Zone   string
}

// Options configure Start.
type Options struct {
	Mode Mode
	// CRDDirectoryPaths are installed (and waited for until Established) before Start returns.
	CRDDirectoryPaths []string
	// Nodes are created in Full mode; one node "kwok-node-0" when empty.
	Nodes []Node
	// BinDir holds the cluster binaries; default $NEXO_TEST_BIN, else <repo>/bin.
	BinDir string
	// Dir is the state folder (data, certs, logs, kubeconfig); default a new temp folder,
	// removed by Stop. A given Dir is kept.
	Dir string
	// APIServerFlags are extra kube-apiserver flags (name without dashes → value), for example
	// a low max-requests-inflight to throttle clients.
	APIServerFlags map[string]string
}

// Cluster is a running control plane.
type Cluster struct {
	// Config is an admin (system:masters) client config.
	Config *rest.Config
	// Kubeconfig is the path of an admin kubeconfig file for external processes.
	Kubeconfig string
	// Dir is the state folder.
	Dir string

	env     *envtest.Environment
	procs   []*process
	ownsDir bool
	// apiserver is the kube-apiserver RestartAPIServer started (nil: envtest's own is running).
	apiserver *process
}

// BinDir is where the cluster binaries and tools are: $NEXO_TEST_BIN, else <repo>/bin.
func BinDir() string {
	if bin := os.Getenv("NEXO_TEST_BIN"); bin != "" {
		return bin
	}
	return filepath.Join(RepoRoot(), "bin")
}

// modulePath is the module whose go.mod marks the repository's top folder.
const modulePath = "github.com/nexo-io/nexo-edge"

// RepoRoot is the repository's top folder: the nearest folder at or above the working directory
// whose go.mod declares this module (go test runs a package's tests in its folder), else the one
// this source file was compiled from. The working directory comes first because a build with
// -trimpath, as CI's (docs/development.md, "CI time"), records no source folder.
func RepoRoot() string {
	if wd, err := os.Getwd(); err == nil {
		for dir := wd; ; dir = filepath.Dir(dir) {
			if declaresModule(filepath.Join(dir, "go.mod")) {
				return dir
			}
			if filepath.Dir(dir) == dir {
				break
			}
		}
	}
	_, file, _, _ := runtime.Caller(0)
	if !filepath.IsAbs(file) {
		panic(fmt.Sprintf("testcluster: no go.mod of %s at or above the working directory, and this binary was built with -trimpath: run it from inside the repository", modulePath))
	}
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}

// declaresModule reports whether the go.mod at path declares modulePath (the tools modules under
// hack/tools declare their own).
func declaresModule(path string) bool {
	data, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`) == modulePath
		}
	}
	return false
}

// CRDDir is the folder of the generated CRDs.
func CRDDir() string { return filepath.Join(RepoRoot(), "config", "crd", "bases") }

// Start starts a cluster. On error everything already started is stopped.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	if opts.Mode == "" {
		opts.Mode = Envtest
	}
	bin := opts.BinDir
	if bin == "" {
		bin = BinDir()
	}
	// c is not the named result: a failed start returns nil, and the deferred cleanup must still
	// see what was started.
	c := &Cluster{Dir: opts.Dir}
	if c.Dir == "" {
		if c.Dir, err = os.MkdirTemp("", "nexo-cluster-"); err != nil {
			return nil, err
		}
		c.ownsDir = true
	} else if err = os.MkdirAll(c.Dir, 0o755); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = c.Stop()
		}
	}()

	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = bin
	}
	for _, name := range []string{"etcd", "kube-apiserver"} {
		if _, statErr := os.Stat(filepath.Join(assets, name)); statErr != nil {
			return nil, fmt.Errorf("%s not found in %s: run `make cluster-tools` (or set KUBEBUILDER_ASSETS)", name, assets)
		}
	}
	c.env = &envtest.Environment{
		BinaryAssetsDirectory:    assets,
		CRDDirectoryPaths:        opts.CRDDirectoryPaths,
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	// envtest's default Service range is a /24; benchmarks create a Service per proxy.
	c.env.ControlPlane.GetAPIServer().Configure().Set("service-cluster-ip-range", "10.96.0.0/16")
	for k, v := range opts.APIServerFlags {
		c.env.ControlPlane.GetAPIServer().Configure().Set(k, v)
	}
	if c.Config, err = c.env.Start(); err != nil {
		return nil, fmt.Errorf("start envtest control plane: %w", err)
	}
	c.Config.QPS, c.Config.Burst = -1, -1 // tests are the only client; no client-side throttling
	admin, err := c.env.AddUser(envtest.User{Name: "nexo-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, fmt.Errorf("create admin user: %w", err)
	}
	kubeconfig, err := admin.KubeConfig()
	if err != nil {
		return nil, err
	}
	c.Kubeconfig = filepath.Join(c.Dir, "kubeconfig")
	if err = os.WriteFile(c.Kubeconfig, kubeconfig, 0o600); err != nil {
		return nil, err
	}
	if opts.Mode == Full {
		if err = c.startFull(ctx, bin, opts.Nodes); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (c *Cluster) startFull(ctx context.Context, bin string, nodes []Node) error {
	for _, name := range []string{"kube-controller-manager", "kube-scheduler", "kwok"} {
		if _, err := os.Stat(filepath.Join(bin, name)); err != nil {
			return fmt.Errorf("%s not found in %s: run `make cluster-tools`", name, bin)
		}
	}
	kc := c.Kubeconfig
	saKey := filepath.Join(c.env.ControlPlane.APIServer.CertDir, "sa-signer.key")
	cmPort, err := FreePort()
	if err != nil {
		return err
	}
	cm, err := c.spawn(bin, "kube-controller-manager",
		"--kubeconfig="+kc, "--authentication-kubeconfig="+kc, "--authorization-kubeconfig="+kc,
		"--leader-elect=false", "--controllers=*,-serviceaccount-token",
		"--service-account-private-key-file="+saKey, "--use-service-account-credentials=false",
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", cmPort),
		"--kube-api-qps=500", "--kube-api-burst=1000", "--concurrent-deployment-syncs=10",
		"--concurrent-replicaset-syncs=10", "--concurrent-gc-syncs=50")
	if err != nil {
		return err
	}
	schedPort, err := FreePort()
	if err != nil {
		return err
	}
	sched, err := c.spawn(bin, "kube-scheduler",
		"--kubeconfig="+kc, "--authentication-kubeconfig="+kc, "--authorization-kubeconfig="+kc,
		"--leader-elect=false", "--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", schedPort))
	if err != nil {
		return err
	}
	stages, err := kwokStages(bin, c.Dir)
	if err != nil {
		return err
	}
	kwokPort, err := FreePort()
	if err != nil {
		return err
	}
	kw, err := c.spawn(bin, "kwok", "--kubeconfig="+kc, "--manage-all-nodes=true", "--config="+stages,
		fmt.Sprintf("--server-address=127.0.0.1:%d", kwokPort))
	if err != nil {
		return err
	}
	for _, h := range []struct {
		p   *process
		url string
	}{
		{cm, fmt.Sprintf("https://127.0.0.1:%d/healthz", cmPort)},
		{sched, fmt.Sprintf("https://127.0.0.1:%d/healthz", schedPort)},
		{kw, fmt.Sprintf("http://127.0.0.1:%d/healthz", kwokPort)},
	} {
		if err := h.p.waitHealthy(ctx, h.url, 2*time.Minute); err != nil {
			return err
		}
	}
	if len(nodes) == 0 {
		nodes = []Node{{Name: "kwok-node-0"}}
	}
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	for _, n := range nodes {
		if err := CreateNode(ctx, cs, n); err != nil {
			return err
		}
	}
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		ready := 0
		for _, n := range list.Items {
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		return ready >= len(nodes), nil
	})
}

// NodePods is how many pods a simulated node takes.
const NodePods = 1000

// CreateNode registers a simulated node that kwok manages, with topology labels when given.
func CreateNode(ctx context.Context, cs kubernetes.Interface, n Node) error {
	labels := map[string]string{
		"type":                           "kwok",
		corev1.LabelHostname:             n.Name,
		corev1.LabelOSStable:             "linux",
		corev1.LabelArchStable:           "amd64",
		"node-role.kubernetes.io/worker": "",
	}
	if n.Region != "" {
		labels[corev1.LabelTopologyRegion] = n.Region
	}
	if n.Zone != "" {
		labels[corev1.LabelTopologyZone] = n.Zone
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   *resource.NewQuantity(NodePods, resource.DecimalSI),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        n.Name,
			Labels:      labels,
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
		},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
	_, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	return err
}

// Stop stops every process this cluster started, then the API server and etcd, and removes a
// temp state folder. It is safe to call more than once.
func (c *Cluster) Stop() error {
	var errs []error
	for i := len(c.procs) - 1; i >= 0; i-- {
		errs = append(errs, c.procs[i].stop())
	}
	c.procs = nil
	if c.env != nil {
		errs = append(errs, c.env.Stop())
		c.env = nil
	}
	if c.ownsDir && c.Dir != "" {
		errs = append(errs, os.RemoveAll(c.Dir))
		c.Dir = ""
	}
	return errors.Join(errs...)
}

// LogTail returns the last lines of a started component's log (kube-controller-manager,
// kube-scheduler or kwok), for failure messages.
func (c *Cluster) LogTail(name string, lines int) string {
	for _, p := range c.procs {
		if p.name == name {
			return Tail(p.logPath, lines)
		}
	}
	return ""
}

// Pids lists the process ids of the components Start spawned itself (controller-manager,
// scheduler, kwok); etcd and kube-apiserver are envtest's and stopped by it.
func (c *Cluster) Pids() []int {
	pids := make([]int, 0, len(c.procs))
	for _, p := range c.procs {
		pids = append(pids, p.cmd.Process.Pid)
	}
	return pids
}

// Samples reads config/samples, one object per kind, keyed by kind. Each call returns fresh
// objects the caller may change.
func Samples() (map[string]*unstructured.Unstructured, error) {
	files, err := filepath.Glob(filepath.Join(RepoRoot(), "config", "samples", "nexo.io_v1alpha1_*.yaml"))
	if err != nil {
		return nil, err
	}
	out := map[string]*unstructured.Unstructured{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(raw, &u.Object); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		out[u.GetKind()] = u
	}
	return out, nil
}

package testinstall

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/test/framework/testcluster"
)

// LocalPod is one container of an installed Deployment, run as a local process the way a kubelet
// would run it (there is no container runtime here): the container's args and env as the
// installer rendered them into the cluster, env references resolved, Secret and ConfigMap volumes
// kept in sync in a local folder (as the kubelet updates mounted Secrets), authenticated as the
// pod's ServiceAccount. Only what a process cannot share on one machine is changed: the mount
// paths in args become the local folders, and the metrics and probe ports become free loopback
// ports (ProbeURL).
type LocalPod struct {
	// ProbeURL is the health-probe server (http://127.0.0.1:PORT), when the container has one.
	ProbeURL string
	// MetricsAddr is the metrics server's address (127.0.0.1:PORT), when the container has one.
	MetricsAddr string
	// LogPath is the process's combined output.
	LogPath string
	// Args are the arguments the process was started with.
	Args []string

	cmd    *exec.Cmd
	done   chan struct{}
	cancel context.CancelFunc
}

// PodOptions adjust how RunDeployment starts the container.
type PodOptions struct {
	// Dir is the pod's folder (volumes, kubeconfig, log); it must exist.
	Dir string
	// Binary is the executable that the container's image would run.
	Binary string
	// Container is the container's name; the first container when empty.
	Container string
	// ExtraEnv is added to the environment (for example HTTPS_PROXY on a test machine).
	ExtraEnv []string
	// ExtraArgs are appended to the container's args (later flags win).
	ExtraArgs []string
	// LogPath is where the output goes; default Dir/NAME.log.
	LogPath string
}

// RunDeployment starts the container of Deployment ns/name as a local process (see LocalPod).
// admin plays the kubelet: it reads the Deployment and the Secrets and ConfigMaps the pod uses.
func RunDeployment(ctx context.Context, admin *rest.Config, ns, name string, opts PodOptions) (*LocalPod, error) {
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return nil, err
	}
	d, err := cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("the installed Deployment %s/%s: %w", ns, name, err)
	}
	spec := d.Spec.Template.Spec
	i := slices.IndexFunc(spec.Containers, func(c corev1.Container) bool { return opts.Container == "" || c.Name == opts.Container })
	if i < 0 {
		return nil, fmt.Errorf("deployment %s/%s has no container %q", ns, name, opts.Container)
	}
	container := spec.Containers[i]
	sa := spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	saCfg, err := testcluster.ServiceAccountConfig(ctx, admin, ns, sa)
	if err != nil {
		return nil, fmt.Errorf("a token for ServiceAccount %s/%s: %w", ns, sa, err)
	}
	kubeconfig := filepath.Join(opts.Dir, "kubeconfig")
	if err := testcluster.WriteKubeconfig(kubeconfig, sa, saCfg); err != nil {
		return nil, err
	}

	podCtx, cancel := context.WithCancel(context.Background())
	p := &LocalPod{LogPath: opts.LogPath, done: make(chan struct{}), cancel: cancel}
	if p.LogPath == "" {
		p.LogPath = filepath.Join(opts.Dir, name+".log")
	}
	ok := false
	defer func() {
		if !ok {
			cancel()
		}
	}()

	// Volumes: each mounted Secret or ConfigMap is a local folder, synced until the pod stops.
	mounts := map[string]string{} // mount path → local folder
	var syncs []func(context.Context) error
	for _, m := range container.VolumeMounts {
		vi := slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name })
		if vi < 0 {
			return nil, fmt.Errorf("volume mount %s names no volume", m.Name)
		}
		local := filepath.Join(opts.Dir, "volumes", m.Name)
		if err := os.MkdirAll(local, 0o700); err != nil {
			return nil, err
		}
		mounts[m.MountPath] = local
		if s := volumeSync(cs, ns, spec.Volumes[vi], local); s != nil {
			syncs = append(syncs, s)
		}
	}
	for _, s := range syncs {
		if err := s(ctx); err != nil {
			return nil, err
		}
	}
	go func() {
		t := time.NewTicker(300 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-podCtx.Done():
				return
			case <-t.C:
				for _, s := range syncs {
					_ = s(podCtx)
				}
			}
		}
	}()
	paths := make([]string, 0, len(mounts))
	for m := range mounts {
		paths = append(paths, m)
	}
	slices.SortFunc(paths, func(a, b string) int { return len(b) - len(a) }) // longest first
	local := func(s string) string {
		for _, m := range paths {
			s = strings.ReplaceAll(s, m, mounts[m])
		}
		return s
	}

	env, err := resolveEnv(ctx, cs, ns, name+"-local", d, container)
	if err != nil {
		return nil, err
	}
	for i := range env {
		env[i] = local(env[i])
	}
	var args []string
	for _, a := range append(slices.Clone(container.Command[min(len(container.Command), 1):]), container.Args...) {
		args = append(args, local(a))
	}
	has := func(flag string) bool {
		return slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, flag+"=") })
	}
	if has("--metrics-bind-address") {
		port, _ := testcluster.FreePort()
		p.MetricsAddr = fmt.Sprintf("127.0.0.1:%d", port)
		args = append(args, "--metrics-bind-address="+p.MetricsAddr)
	}
	if has("--health-probe-bind-address") {
		port, _ := testcluster.FreePort()
		args = append(args, fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", port))
		p.ProbeURL = fmt.Sprintf("http://127.0.0.1:%d", port)
	}
	args = append(args, opts.ExtraArgs...)
	p.Args = args

	logFile, err := os.Create(p.LogPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(opts.Binary, args...)
	cmd.Env = append(append(env, "KUBECONFIG="+kubeconfig, "HOME="+opts.Dir, "PATH="+os.Getenv("PATH")), opts.ExtraEnv...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	p.cmd = cmd
	go func() { _ = cmd.Wait(); logFile.Close(); close(p.done) }()
	ok = true
	return p, nil
}

// WaitReady polls the probe server's /readyz until it answers 200 or the timeout passes.
func (p *LocalPod) WaitReady(ctx context.Context, timeout time.Duration) error {
	if p.ProbeURL == "" {
		return errors.New("the container has no health-probe server")
	}
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-p.done:
			return fmt.Errorf("the process exited:\n%s", testcluster.Tail(p.LogPath, 20))
		default:
		}
		if ready(p.ProbeURL + "/readyz") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %s:\n%s", timeout, testcluster.Tail(p.LogPath, 20))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Stop ends the process (SIGTERM, then SIGKILL after 15 s) and the volume sync.
func (p *LocalPod) Stop() {
	defer p.cancel()
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// Kill ends the process with SIGKILL (no cleanup, as a crashed or OOM-killed container).
func (p *LocalPod) Kill() {
	defer p.cancel()
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Pid is the process id.
func (p *LocalPod) Pid() int { return p.cmd.Process.Pid }

// Running says whether the process is still running.
func (p *LocalPod) Running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Logs returns the process's output so far.
func (p *LocalPod) Logs() string {
	b, _ := os.ReadFile(p.LogPath)
	return string(b)
}

// volumeSync returns the function that writes a Secret or ConfigMap volume's files into dir (nil
// for other volume kinds, which stay empty folders). Files are replaced atomically and removed
// when their key goes; a missing optional source is an empty folder, as in a pod.
func volumeSync(cs kubernetes.Interface, ns string, v corev1.Volume, dir string) func(context.Context) error {
	switch {
	case v.Secret != nil:
		return func(ctx context.Context) error {
			s, err := cs.CoreV1().Secrets(ns).Get(ctx, v.Secret.SecretName, metav1.GetOptions{})
			if apierrors.IsNotFound(err) && v.Secret.Optional != nil && *v.Secret.Optional {
				return writeFiles(dir, nil, v.Secret.Items)
			}
			if err != nil {
				return fmt.Errorf("volume %s: %w", v.Name, err)
			}
			return writeFiles(dir, s.Data, v.Secret.Items)
		}
	case v.ConfigMap != nil:
		return func(ctx context.Context) error {
			c, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, v.ConfigMap.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) && v.ConfigMap.Optional != nil && *v.ConfigMap.Optional {
				return writeFiles(dir, nil, v.ConfigMap.Items)
			}
			if err != nil {
				return fmt.Errorf("volume %s: %w", v.Name, err)
			}
			data := map[string][]byte{}
			for k, s := range c.Data {
				data[k] = []byte(s)
			}
			for k, b := range c.BinaryData {
				data[k] = b
			}
			return writeFiles(dir, data, v.ConfigMap.Items)
		}
	}
	return nil
}

func writeFiles(dir string, data map[string][]byte, items []corev1.KeyToPath) error {
	want := map[string][]byte{}
	if len(items) == 0 {
		for k, b := range data {
			want[k] = b
		}
	}
	for _, it := range items {
		if b, ok := data[it.Key]; ok {
			want[it.Path] = b
		}
	}
	for name, b := range want {
		path := filepath.Join(dir, name)
		if have, err := os.ReadFile(path); err == nil && string(have) == string(b) {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return err
		}
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			return err
		}
		if err := os.Rename(tmp, path); err != nil {
			return err
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if _, ok := want[e.Name()]; !ok && !e.IsDir() {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
	return nil
}

// resolveEnv computes the container's environment as the kubelet would: plain values, field
// references to the pod's metadata, and ConfigMap and Secret keys (a missing optional one unset).
func resolveEnv(ctx context.Context, cs kubernetes.Interface, ns, podName string, d *appsv1.Deployment, c corev1.Container) ([]string, error) {
	var env []string
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			env = append(env, e.Name+"="+e.Value)
			continue
		}
		src := e.ValueFrom
		switch {
		case src.FieldRef != nil:
			switch path := src.FieldRef.FieldPath; {
			case path == "metadata.namespace":
				env = append(env, e.Name+"="+ns)
			case path == "metadata.name":
				env = append(env, e.Name+"="+podName)
			case strings.HasPrefix(path, "metadata.annotations['"):
				key := strings.TrimSuffix(strings.TrimPrefix(path, "metadata.annotations['"), "']")
				env = append(env, e.Name+"="+d.Spec.Template.Annotations[key])
			default:
				return nil, fmt.Errorf("env %s: field %s is not simulated here", e.Name, path)
			}
		case src.ConfigMapKeyRef != nil:
			ref := src.ConfigMapKeyRef
			cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, ref.Name, metav1.GetOptions{})
			v, found := "", false
			if err == nil {
				v, found = cm.Data[ref.Key]
			} else if !apierrors.IsNotFound(err) {
				return nil, err
			}
			if !found {
				if ref.Optional != nil && *ref.Optional {
					continue
				}
				return nil, fmt.Errorf("env %s: ConfigMap %s key %s is missing (the pod would not start)", e.Name, ref.Name, ref.Key)
			}
			env = append(env, e.Name+"="+v)
		case src.SecretKeyRef != nil:
			ref := src.SecretKeyRef
			s, err := cs.CoreV1().Secrets(ns).Get(ctx, ref.Name, metav1.GetOptions{})
			var v []byte
			found := false
			if err == nil {
				v, found = s.Data[ref.Key]
			} else if !apierrors.IsNotFound(err) {
				return nil, err
			}
			if !found {
				if ref.Optional != nil && *ref.Optional {
					continue
				}
				return nil, fmt.Errorf("env %s: Secret %s key %s is missing (the pod would not start)", e.Name, ref.Name, ref.Key)
			}
			env = append(env, e.Name+"="+string(v))
		default:
			return nil, fmt.Errorf("env %s: this kind of reference is not simulated here", e.Name)
		}
	}
	return env, nil
}

func ready(url string) bool {
	code, _ := probe(url)
	return code == http.StatusOK
}

// Probe asks the pod's probe server for path (/readyz, /healthz): the status code and the body
// (0 and the error when it cannot be reached).
func (p *LocalPod) Probe(path string) (int, string) { return probe(p.ProbeURL + path) }

func probe(url string) (int, string) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// WaitCRDsServed waits until every nexo.io CRD is Established and its API is in discovery. A
// pod started before that exits (the operator cannot map its kinds) and the kubelet restarts it;
// local processes are not restarted, so callers wait instead.
func WaitCRDsServed(ctx context.Context, admin *rest.Config, kinds int, timeout time.Duration) error {
	dc, err := discovery.NewDiscoveryClientForConfig(admin)
	if err != nil {
		return err
	}
	gv := catalog.Group + "/" + catalog.Version
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		res, err := dc.ServerResourcesForGroupVersion(gv)
		if err != nil || len(res.APIResources) < kinds {
			return false, nil
		}
		// The group's own endpoint can serve the kinds before the API server's aggregated
		// discovery (/apis, which a controller-runtime REST mapper reads) lists them: wait for
		// both, or a process started now may find no mapping for a kind and exit.
		_, lists, err := dc.ServerGroupsAndResources()
		if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
			return false, nil
		}
		for _, l := range lists {
			if l.GroupVersion == gv {
				return len(l.APIResources) >= kinds, nil
			}
		}
		return false, nil
	})
}

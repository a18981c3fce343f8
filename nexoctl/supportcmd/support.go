// Package supportcmd is `nexoctl support-bundle`: one archive with what a support engineer asks
// for first (like `kubectl cnpg report` or `cilium sysdump`), with every Secret value redacted.
package supportcmd

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/contract/wire"
	"github.com/nexo-io/nexo-edge/nexoctl/cliopts"
	"github.com/nexo-io/nexo-edge/preflight"
)

// Redacted replaces every Secret value found in the bundle.
const Redacted = "<redacted>"

// minSecretLen: shorter Secret values are not searched for (they would match ordinary text);
// they never enter the bundle anyway, since Secrets are written as key names only.
const minSecretLen = 6

// NewCmd builds the command.
func NewCmd(o *cliopts.Options) *cobra.Command {
	var out string
	var logLines int64
	cmd := &cobra.Command{
		Use:   "support-bundle [--file nexo-support.tar.gz]",
		Short: "Collect Nexo objects, events, the operator's and Manager's logs and preflight into one archive (Secret values redacted)",
		Long: `Writes one .tar.gz with: every Nexo object (with its conditions) and the events about it;
the nexo-operator and nexo-manager Deployments, their pods and logs; the Manager's status
ConfigMap; the result of nexoctl preflight (JSON); and the Secrets of those namespaces as names,
types and key names only. Every value of every Secret nexoctl can read in those namespaces is
then searched for in the whole archive and replaced by <redacted> (also base64-encoded), so a
token that leaked into a log does not leak into the bundle.`,
		Example: `  nexoctl support-bundle
  nexoctl support-bundle --file /tmp/nexo.tar.gz -n nexo-system`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := o.RESTConfig()
			if err != nil {
				return err
			}
			env, err := preflight.NewClusterEnv(cfg, o.NamespaceOr(cliopts.DefaultNS))
			if err != nil {
				return cliopts.Fail(cliopts.ExitCannot, "%v", err)
			}
			if _, err := env.Discovery.ServerVersion(); err != nil {
				return cliopts.Fail(cliopts.ExitCannot, "cannot reach the cluster: %v", err)
			}
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return cliopts.Fail(cliopts.ExitCannot, "%v", err)
			}
			b := &bundle{files: map[string][]byte{}}
			collect(cmd.Context(), env, cs, b, logLines)
			n := b.redact(cmd.Context(), cs)
			f, err := os.OpenFile(out, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
			if err != nil {
				return cliopts.Fail(cliopts.ExitCannot, "%v", err)
			}
			defer f.Close()
			if err := b.write(f); err != nil {
				return cliopts.Fail(cliopts.ExitCannot, "write %s: %v", out, err)
			}
			fmt.Fprintf(o.Out, "wrote %s: %d files, %d Secret values redacted\n", out, len(b.files), n)
			for _, p := range b.problems {
				fmt.Fprintln(o.Err, "note:", p)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "file", "nexo-support.tar.gz", "archive to write (mode 0600)")
	cmd.Flags().Int64Var(&logLines, "log-lines", 2000, "last lines of each container's log")
	return cmd
}

type bundle struct {
	files      map[string][]byte
	problems   []string
	namespaces map[string]bool // where Secrets are read for redaction
}

func (b *bundle) add(name string, v any) {
	switch x := v.(type) {
	case []byte:
		b.files[name] = x
	case string:
		b.files[name] = []byte(x)
	default:
		data, err := yaml.Marshal(v)
		if err != nil {
			data = []byte("error: " + err.Error())
		}
		b.files[name] = data
	}
}

func (b *bundle) problem(format string, args ...any) {
	b.problems = append(b.problems, fmt.Sprintf(format, args...))
}

func collect(ctx context.Context, env *preflight.Env, cs kubernetes.Interface, b *bundle, logLines int64) {
	ns := env.Namespace
	b.namespaces = map[string]bool{ns: true}
	b.add("README.txt", fmt.Sprintf("Nexo Edge support bundle, nexoctl %s, %s\nProduct namespace: %s\nSecret values are redacted (%s).\n",
		catalog.BuildVersion, time.Now().UTC().Format(time.RFC3339), ns, Redacted))

	// Nexo objects, all namespaces, with their status.
	for _, k := range catalog.Kinds {
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion(catalog.Group + "/" + catalog.Version)
		list.SetKind(k.Kind + "List")
		if err := env.Client.List(ctx, list); err != nil {
			b.problem("list %s: %v", k.Kind, err)
			continue
		}
		for _, o := range list.Items {
			b.namespaces[o.GetNamespace()] = true
			o.SetManagedFields(nil)
			b.add(fmt.Sprintf("objects/%s/%s/%s.yaml", o.GetNamespace(), k.Kind, o.GetName()), o.Object)
		}
	}
	// Events about Nexo objects, and everything in the product's namespace.
	for space := range b.namespaces {
		evs, err := cs.CoreV1().Events(space).List(ctx, metav1.ListOptions{})
		if err != nil {
			b.problem("events in %s: %v", space, err)
			continue
		}
		var lines []string
		sort.Slice(evs.Items, func(i, j int) bool { return evs.Items[i].LastTimestamp.Before(&evs.Items[j].LastTimestamp) })
		for _, e := range evs.Items {
			if space != ns && !strings.HasPrefix(e.InvolvedObject.APIVersion, catalog.Group+"/") {
				continue
			}
			lines = append(lines, fmt.Sprintf("%s\t%s\t%s/%s\t%s\t%s", e.LastTimestamp.UTC().Format(time.RFC3339), e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message))
		}
		b.add("events/"+space+".txt", strings.Join(lines, "\n")+"\n")
	}
	// The operator and the Manager: Deployments, pods, logs.
	for _, name := range []string{wire.OperatorName, wire.ManagerName} {
		d := &appsv1.Deployment{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
			b.problem("deployment %s/%s: %v", ns, name, err)
			continue
		}
		d.ManagedFields = nil
		b.add("components/"+name+"/deployment.yaml", d)
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + name})
		if err != nil {
			b.problem("pods of %s: %v", name, err)
			continue
		}
		for _, p := range pods.Items {
			p.ManagedFields = nil
			b.add("components/"+name+"/pods/"+p.Name+".yaml", &p)
			for _, c := range p.Spec.Containers {
				raw, err := cs.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: c.Name, TailLines: &logLines}).Do(ctx).Raw()
				if err != nil {
					raw = []byte("logs unavailable: " + err.Error() + "\n")
				}
				b.add("components/"+name+"/logs/"+p.Name+"-"+c.Name+".log", raw)
			}
		}
	}
	if cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, wire.ManagerStatusConfigMap, metav1.GetOptions{}); err == nil {
		cm.ManagedFields = nil
		b.add("components/nexo-manager/status-configmap.yaml", cm)
	}
	// Secrets as names, types and key names: never a value.
	for space := range b.namespaces {
		secrets, err := cs.CoreV1().Secrets(space).List(ctx, metav1.ListOptions{})
		if err != nil {
			b.problem("secrets in %s (listed by name only): %v", space, err)
			continue
		}
		var lines []string
		for _, s := range secrets.Items {
			var keys []string
			for k, v := range s.Data {
				keys = append(keys, fmt.Sprintf("%s (%d bytes)", k, len(v)))
			}
			sort.Strings(keys)
			lines = append(lines, fmt.Sprintf("%s\t%s\t%s", s.Name, s.Type, strings.Join(keys, ", ")))
		}
		sort.Strings(lines)
		b.add("secrets/"+space+".txt", strings.Join(lines, "\n")+"\n")
	}
	report := preflight.Run(ctx, env, preflight.ClusterCategories(false))
	raw, _ := json.MarshalIndent(report, "", "  ")
	b.add("preflight.json", raw)
}

// redact replaces, in every file, each value of every Secret readable in the bundle's
// namespaces (and its base64 form), and returns how many distinct values were found.
func (b *bundle) redact(ctx context.Context, cs kubernetes.Interface) int {
	values := map[string]bool{}
	for space := range b.namespaces {
		secrets, err := cs.CoreV1().Secrets(space).List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		for _, s := range secrets.Items {
			for _, v := range s.Data {
				for _, line := range append([]string{string(v)}, strings.Split(string(v), "\n")...) {
					if line = strings.TrimSpace(line); len(line) >= minSecretLen {
						values[line] = true
					}
				}
			}
		}
	}
	var needles []string
	for v := range values {
		needles = append(needles, v, base64.StdEncoding.EncodeToString([]byte(v)))
	}
	sort.Slice(needles, func(i, j int) bool { return len(needles[i]) > len(needles[j]) }) // longest first
	found := 0
	for name, data := range b.files {
		for _, n := range needles {
			if bytes.Contains(data, []byte(n)) {
				data = bytes.ReplaceAll(data, []byte(n), []byte(Redacted))
				found++
			}
		}
		b.files[name] = data
	}
	return found
}

func (b *bundle) write(w io.Writer) error {
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	names := make([]string, 0, len(b.files))
	for n := range b.files {
		names = append(names, n)
	}
	sort.Strings(names)
	now := time.Now()
	for _, n := range names {
		data := b.files[n]
		if err := tw.WriteHeader(&tar.Header{Name: "nexo-support/" + n, Mode: 0o600, Size: int64(len(data)), ModTime: now}); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

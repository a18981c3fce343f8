package nexoctl

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/nexoctl/cliopts"
	"github.com/nexo-io/nexo-edge/preflight"
)

// registerCompletions adds dynamic shell completion (nexoctl completion bash|zsh|fish): -o values,
// namespaces from the cluster, and NexoProxy names for status, asking the cluster with the
// same flags the command line has so far. A cluster that does not answer completes nothing.
func registerCompletions(root, status *cobra.Command, o *cliopts.Options) {
	_ = root.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{cliopts.OutputText, cliopts.OutputJSON, cliopts.OutputYAML}, cobra.ShellCompDirectiveNoFileComp
	})
	_ = root.RegisterFlagCompletionFunc("namespace", func(_ *cobra.Command, _ []string, prefix string) ([]string, cobra.ShellCompDirective) {
		return completeNamespaces(o, prefix), cobra.ShellCompDirectiveNoFileComp
	})
	status.ValidArgsFunction = func(_ *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return completeProxies(o, prefix), cobra.ShellCompDirectiveNoFileComp
	}
}

func completionContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 5*time.Second)
}

func completeNamespaces(o *cliopts.Options, prefix string) []string {
	cfg, err := o.RESTConfig()
	if err != nil {
		return nil
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil
	}
	ctx, cancel := completionContext()
	defer cancel()
	list, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	var out []string
	for _, n := range list.Items {
		if strings.HasPrefix(n.Name, prefix) {
			out = append(out, n.Name)
		}
	}
	return out
}

func completeProxies(o *cliopts.Options, prefix string) []string {
	cfg, err := o.RESTConfig()
	if err != nil {
		return nil
	}
	env, err := preflight.NewClusterEnv(cfg, cliopts.DefaultNS)
	if err != nil {
		return nil
	}
	ns, err := o.ContextNamespace()
	if err != nil {
		return nil
	}
	ctx, cancel := completionContext()
	defer cancel()
	var list nexov1alpha1.NexoProxyList
	if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil
	}
	var out []string
	for _, p := range list.Items {
		if strings.HasPrefix(p.Name, prefix) {
			out = append(out, p.Name)
		}
	}
	return out
}

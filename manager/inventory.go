package manager

import (
	"context"
	"encoding/json"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/contract/fingerprint"
	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/contract/wire"
)

// Inventory collects what a heartbeat reports.
func (a *Agent) Inventory(ctx context.Context) (*protocol.Heartbeat, error) {
	ks := &corev1.Namespace{}
	if err := a.client.Get(ctx, client.ObjectKey{Name: "kube-system"}, ks); err != nil {
		return nil, err
	}
	hb := &protocol.Heartbeat{
		ProtocolVersion: protocol.Version,
		ManagerVersion:  a.cfg.Version,
		ClusterID:       string(ks.UID),
		ProxyImage:      a.cfg.ProxyImage,
		Capabilities:    append([]string{protocol.CapHeartbeat}, commandCapabilities()...),
		Deployments:     []protocol.Deployment{},
	}
	// The cluster's own limits, as its admin set them (empty lists, never nil: "reported, allows
	// nothing" differs from "not reported").
	hb.Limits = &protocol.Limits{Namespaces: append([]string{}, a.cfg.Limits.Namespaces...), ImageRepositories: append([]string{}, a.cfg.Limits.ImageRepositories...)}
	if v, err := a.discovery.ServerVersion(); err == nil {
		hb.Cluster.KubernetesVersion = v.GitVersion
	}
	var nodes corev1.NodeList
	if err := a.client.List(ctx, &nodes); err == nil {
		for _, n := range nodes.Items {
			if r := n.Labels[corev1.LabelTopologyRegion]; r != "" && hb.Cluster.Region == "" {
				hb.Cluster.Region, hb.Cluster.Zone = r, n.Labels[corev1.LabelTopologyZone]
			}
		}
	}
	nexo, err := fingerprint.NexoCRDs(ctx, a.client)
	if err != nil {
		return nil, err
	}
	for _, c := range nexo {
		hb.InstalledKinds = append(hb.InstalledKinds, c.Spec.Names.Kind)
		if a.kindSupport.Load() && c.Labels[catalog.SupportLabel] == string(catalog.SchemaOnly) {
			hb.SchemaOnlyKinds = append(hb.SchemaOnlyKinds, c.Spec.Names.Kind)
		}
		if c.Spec.Names.Kind == "NexoPipeline" {
			hb.PipelineKinds = pipelineKinds(&c)
		}
	}
	op := &appsv1.Deployment{}
	if err := a.client.Get(ctx, client.ObjectKey{Namespace: a.cfg.Namespace, Name: wire.OperatorName}, op); err == nil {
		hb.BundleVersion, hb.InstalledBy = installedBundle(op.Labels)
	}
	sort.Strings(hb.InstalledKinds)
	sort.Strings(hb.SchemaOnlyKinds)
	if len(nexo) > 0 { // no Nexo CRD installed: no fingerprint to report (not the empty set's)
		hb.SchemaFingerprint, _ = fingerprint.Of(nexo)
	}
	hb.Capabilities = append(hb.Capabilities, reportedCapabilities(hb)...)

	inv, err := a.startInventory(ctx)
	if err != nil {
		return nil, err
	}
	inv.report(hb, protocol.MaxInventoryChanges)
	return hb, nil
}

// reportedCapabilities are the inventory capabilities whose fields hb fills: each is advertised
// only when the heartbeat carries it, and the promotion contract only when it carries all four
// (bundle version, installed kinds, schema fingerprint, pipeline kinds).
func reportedCapabilities(hb *protocol.Heartbeat) []string {
	var caps []string
	for _, f := range []struct {
		capability string
		filled     bool
	}{
		{protocol.CapBundleVersion, hb.BundleVersion != ""},
		{protocol.CapCRDKinds, len(hb.InstalledKinds) > 0},
		{protocol.CapSchemaFingerprint, hb.SchemaFingerprint != ""},
		{protocol.CapPipelineKinds, len(hb.PipelineKinds) > 0},
	} {
		if f.filled {
			caps = append(caps, f.capability)
		}
	}
	if len(caps) == 4 {
		caps = append(caps, protocol.CapPromotionContract)
	}
	return caps
}

// pipelineKinds reads, from the installed NexoPipeline CRD, the kinds each slot accepts (the
// enum on each reference's kind): what the cluster's API takes, whatever this build knows.
func pipelineKinds(c *apiextensionsv1.CustomResourceDefinition) map[string][]string {
	out := map[string][]string{}
	for _, v := range c.Spec.Versions {
		if v.Name != catalog.Version || v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		spec := v.Schema.OpenAPIV3Schema.Properties["spec"]
		for slot, p := range spec.Properties {
			if p.Items != nil && p.Items.Schema != nil {
				p = *p.Items.Schema
			}
			for _, e := range p.Properties["kind"].Enum {
				var kind string
				if json.Unmarshal(e.Raw, &kind) == nil {
					out[slot] = append(out[slot], kind)
				}
			}
			sort.Strings(out[slot])
		}
	}
	return out
}

// ownedProxies lists the NexoProxies this Manager owns, in its watched namespaces (or all).
func (a *Agent) ownedProxies(ctx context.Context) ([]nexov1alpha1.NexoProxy, error) {
	owned := client.MatchingLabels{wire.OwnerLabel: a.OwnerID()}
	if len(a.cfg.WatchNamespaces) == 0 {
		var list nexov1alpha1.NexoProxyList
		err := a.client.List(ctx, &list, owned)
		return list.Items, err
	}
	var out []nexov1alpha1.NexoProxy
	for _, ns := range a.cfg.WatchNamespaces {
		var list nexov1alpha1.NexoProxyList
		if err := a.client.List(ctx, &list, owned, client.InNamespace(ns)); err != nil {
			return nil, err
		}
		out = append(out, list.Items...)
	}
	return out, nil
}

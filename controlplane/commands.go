// Preparing a queued command: signing its manifests for the environment, and turning a
// rollout into the signed proxies it changes.

package controlplane

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/contract/signature"
)

// sign signs u for claims, in place.
func sign(key ed25519.PrivateKey, u *unstructured.Unstructured, claims signature.Claims) (json.RawMessage, error) {
	if err := signature.Sign(u, key, claims); err != nil {
		return nil, err
	}
	return u.MarshalJSON()
}

// rolloutScope narrows a rollout through a stage to its project's proxies in the namespaces the
// stage may deploy to.
type rolloutScope struct {
	project    string
	namespaces []string
}

// prepare validates a command, answering 400 with the reason. A deploy's manifests and a
// rollout's re-imaged proxies are returned decoded: what is checked, counted and signed is the
// same object (queue signs them).
func (s *Server) prepare(ctx context.Context, envID string, c *protocol.Command, scope *rolloutScope) ([]*unstructured.Unstructured, error) {
	switch c.Type {
	case protocol.Deploy:
		if len(c.Namespaces) == 0 || len(c.Manifests) == 0 {
			return nil, fail(http.StatusBadRequest, "deploy needs namespaces and manifests")
		}
		objs := make([]*unstructured.Unstructured, 0, len(c.Manifests))
		for i, raw := range c.Manifests {
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(raw); err != nil {
				return nil, fail(http.StatusBadRequest, "manifest %d is not a Kubernetes object (apiVersion, kind and metadata, spelled exactly): %s", i, truncate(err.Error(), 200))
			}
			if _, ok := catalog.Lookup(u.GetKind()); !ok || u.GroupVersionKind().Group != catalog.Group {
				return nil, fail(http.StatusBadRequest, "manifest %d is %q %q: only nexo.io kinds are deployed (apiVersion and kind, spelled exactly)", i, truncate(u.GetAPIVersion(), 60), truncate(u.GetKind(), 60))
			}
			if errs := validation.IsDNS1123Subdomain(u.GetName()); len(errs) > 0 {
				return nil, fail(http.StatusBadRequest, "manifest %d (%s) has no valid metadata.name (spelled exactly): %s", i, u.GetKind(), strings.Join(errs, "; "))
			}
			if !slices.Contains(c.Namespaces, u.GetNamespace()) {
				return nil, fail(http.StatusBadRequest, "manifest %d (%s %s) is in namespace %q, not one of %v", i, u.GetKind(), u.GetName(), truncate(u.GetNamespace(), 64), c.Namespaces)
			}
			objs = append(objs, u)
		}
		return objs, nil
	case protocol.Rollout:
		if c.Image == "" {
			return nil, fail(http.StatusBadRequest, "rollout needs an image")
		}
		return s.rolloutProxies(ctx, envID, c, scope)
	case protocol.Upgrade:
		if c.TargetVersion == "" {
			return nil, fail(http.StatusBadRequest, "upgrade needs a targetVersion")
		}
	case protocol.Uninstall:
		if c.Proxy == nil || c.Proxy.Namespace == "" || c.Proxy.Name == "" {
			return nil, fail(http.StatusBadRequest, "uninstall needs a proxy {namespace, name}")
		}
	case protocol.WorkloadConfig:
		return nil, fail(http.StatusBadRequest, "legacy workload configuration is not supported by Managers of this protocol: deploy the equivalent nexo.io objects (NexoProxy, NexoPipeline, NexoDeploymentProfile, steps) instead")
	default:
		return nil, fail(http.StatusBadRequest, "unknown command type %q: use deploy, rollout, upgrade or uninstall", truncate(c.Type, 40))
	}
	return nil, nil
}

// rolloutProxies returns, for a rollout, the NexoProxies of the environment's deployed set (the
// named one, or all; through a stage only its project's, in its namespaces) with
// spec.proxyImage set to the new image; queue signs them again. The Manager holds no signing
// key, and editing a signed object in the cluster would invalidate its signature. An
// uninstalled proxy has left the deployed set, so a rollout never re-creates it.
func (s *Server) rolloutProxies(ctx context.Context, envID string, c *protocol.Command, scope *rolloutScope) ([]*unstructured.Unstructured, error) {
	proxies, err := s.Store.Desired(ctx, envID, "NexoProxy")
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	for _, d := range proxies {
		if c.Proxy != nil && (c.Proxy.Namespace != d.Namespace || c.Proxy.Name != d.Name) {
			continue
		}
		if scope != nil && (d.Origin.Project != scope.project || !slices.Contains(scope.namespaces, d.Namespace)) {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON([]byte(d.Manifest)); err != nil {
			return nil, err
		}
		if err := unstructured.SetNestedField(u.Object, c.Image, "spec", "proxyImage"); err != nil {
			return nil, err
		}
		objs = append(objs, u)
		if !slices.Contains(c.Namespaces, d.Namespace) {
			c.Namespaces = append(c.Namespaces, d.Namespace)
		}
	}
	if c.Proxy != nil && len(objs) == 0 {
		return nil, fail(http.StatusBadRequest, "NexoProxy %s/%s is not deployed in this environment", c.Proxy.Namespace, c.Proxy.Name)
	}
	return objs, nil
}

// queue signs objs (a deploy's manifests, a rollout's proxies) for env at the command's
// sequence number and queues the command, in the request's transaction, and answers 201
// {"id"}. Manifests are signed inside the queueing transaction, for this environment (the
// audience) at the command's sequence number (the revision), so a later command always carries
// a higher revision than an earlier one.
func (s *Server) queue(w http.ResponseWriter, r *http.Request, env Environment, c protocol.Command, objs []*unstructured.Unstructured, origin Origin) error {
	if err := s.refuseLost(r.Context(), env); err != nil {
		return err
	}
	c.ID = "cmd-" + randomID(8)
	key, err := s.activeKey(r.Context())
	if err != nil {
		return err
	}
	var proxies []protocol.ObjectRef
	for _, u := range objs {
		if u.GetKind() == "NexoProxy" {
			proxies = append(proxies, protocol.ObjectRef{Namespace: u.GetNamespace(), Name: u.GetName()})
		}
	}
	_, err = s.Store.Enqueue(r.Context(), env.ID, c.ID, c.Type, origin, proxies, func(seq int64) (string, error) {
		c.Manifests = make([]json.RawMessage, len(objs))
		for i, u := range objs {
			signed, err := sign(key, u, signature.Claims{Audience: env.ID, Revision: seq})
			if err != nil {
				return "", fmt.Errorf("manifest %d: %w", i, err)
			}
			c.Manifests[i] = signed
		}
		if len(objs) == 0 {
			c.Manifests = nil
		}
		body, err := json.Marshal(c)
		return string(body), err
	})
	if err != nil {
		return err
	}
	auditOf(r).commandID = c.ID
	if c.Type == protocol.Uninstall {
		// The proxy leaves the deployed set now: a rollout queued after this never re-creates it.
		if err := s.Store.Forget(r.Context(), env.ID, "NexoProxy", c.Proxy.Namespace, c.Proxy.Name); err != nil {
			return err
		}
	}
	writeJSON(w, http.StatusCreated, map[string]string{"id": c.ID})
	return nil
}

// deployedObjects lists the manifests of an applied deploy or rollout, for the deployed set.
func deployedObjects(body string) []DesiredObject {
	var c protocol.Command
	if json.Unmarshal([]byte(body), &c) != nil || (c.Type != protocol.Deploy && c.Type != protocol.Rollout) {
		return nil
	}
	var out []DesiredObject
	for _, raw := range c.Manifests {
		u := &unstructured.Unstructured{}
		if u.UnmarshalJSON(raw) != nil {
			continue
		}
		out = append(out, DesiredObject{Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName(), Manifest: string(raw)})
	}
	return out
}

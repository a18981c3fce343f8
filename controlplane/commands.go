// Preparing a queued command: signing its manifests for the environment, and turning a
// rollout into the signed proxies it changes.

package controlplane

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/contract/signature"
)

func sign(key ed25519.PrivateKey, raw json.RawMessage, claims signature.Claims) (json.RawMessage, error) {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		return nil, err
	}
	if err := signature.Sign(u, key, claims); err != nil {
		return nil, err
	}
	return u.MarshalJSON()
}

// prepare validates a command; deploy manifests are checked here and signed when queued.
func (s *Server) prepare(ctx context.Context, envID string, c *protocol.Command) error {
	switch c.Type {
	case protocol.Deploy:
		if len(c.Namespaces) == 0 || len(c.Manifests) == 0 {
			return errors.New("deploy needs namespaces and manifests")
		}
		for i, raw := range c.Manifests {
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(raw); err != nil {
				return fmt.Errorf("manifest %d: %v", i, err)
			}
			if _, ok := catalog.Lookup(u.GetKind()); !ok || u.GroupVersionKind().Group != catalog.Group {
				return fmt.Errorf("manifest %d is %s %s: only nexo.io kinds are deployed", i, u.GetAPIVersion(), u.GetKind())
			}
			if !slices.Contains(c.Namespaces, u.GetNamespace()) {
				return fmt.Errorf("manifest %d (%s %s) is in namespace %q, not one of %v", i, u.GetKind(), u.GetName(), u.GetNamespace(), c.Namespaces)
			}
		}
	case protocol.Rollout:
		if c.Image == "" {
			return errors.New("rollout needs an image")
		}
		return s.rolloutProxies(ctx, envID, c)
	case protocol.Upgrade:
		if c.TargetVersion == "" {
			return errors.New("upgrade needs a targetVersion")
		}
	case protocol.Uninstall:
		if c.Proxy == nil || c.Proxy.Namespace == "" || c.Proxy.Name == "" {
			return errors.New("uninstall needs a proxy {namespace, name}")
		}
	case protocol.WorkloadConfig:
		return errors.New("legacy workload configuration is not supported by Managers of this protocol: deploy the equivalent nexo.io objects (NexoProxy, NexoPipeline, NexoDeploymentProfile, steps) instead")
	default:
		return fmt.Errorf("unknown command type %q: use deploy, rollout, upgrade or uninstall", c.Type)
	}
	return nil
}

// rolloutProxies attaches to a rollout the NexoProxies of the environment's deployed set (the
// named one, or all) with spec.proxyImage set to the new image; enqueue signs them again. The
// Manager holds no signing key, and editing a signed object in the cluster would invalidate its
// signature. An uninstalled proxy has left the deployed set, so a rollout never re-creates it.
func (s *Server) rolloutProxies(ctx context.Context, envID string, c *protocol.Command) error {
	proxies, err := s.Store.Desired(ctx, envID, "NexoProxy")
	if err != nil {
		return err
	}
	for _, d := range proxies {
		if c.Proxy != nil && (c.Proxy.Namespace != d.Namespace || c.Proxy.Name != d.Name) {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON([]byte(d.Manifest)); err != nil {
			return err
		}
		if err := unstructured.SetNestedField(u.Object, c.Image, "spec", "proxyImage"); err != nil {
			return err
		}
		raw, err := u.MarshalJSON()
		if err != nil {
			return err
		}
		c.Manifests = append(c.Manifests, raw)
		if !slices.Contains(c.Namespaces, d.Namespace) {
			c.Namespaces = append(c.Namespaces, d.Namespace)
		}
	}
	if c.Proxy != nil && len(c.Manifests) == 0 {
		return fmt.Errorf("NexoProxy %s/%s is not deployed in this environment", c.Proxy.Namespace, c.Proxy.Name)
	}
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

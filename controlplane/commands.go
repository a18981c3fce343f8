// Queueing a command (docs/protocol.md, "Commands"): every command, from the admin token's route
// or through a project stage, takes one path: prepare (the command type's preparer, from the
// command table), check (the environment is not lost, its Manager advertised the command's
// capability, and through a stage: ownership and the license entitlement), then queue (signed
// for the environment at the command's sequence number, in the request's transaction).

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
	"github.com/nexo-io/nexo-edge/controlplane/authz"
	"github.com/nexo-io/nexo-edge/controlplane/storage"
)

// commandRequest is a command on its way to the queue.
type commandRequest struct {
	env storage.Environment
	cmd protocol.Command
	// stage is the project stage the command goes through; nil for the admin token's command,
	// which skips the stage's checks (not the Manager's, nor the cluster's).
	stage *stagePlan
	// revision is the project revision a deploy or preview through a stage carries (nil for the
	// admin token's commands); via says how it came (storage.ViaDeploy, ViaRollback,
	// ViaPromotion) and promotionID which promotion queued it.
	revision    *storage.Revision
	via         string
	promotionID string
	// caller sent the request; override: it asked to deploy where compatibility is unknown
	// (compatibility.go).
	caller   authz.Caller
	override bool
}

// preparer validates one command type, answering 400 with the reason, and returns the objects
// the command carries, decoded: what is checked, counted and signed is the same object.
type preparer func(s *Server, ctx context.Context, req *commandRequest) ([]*unstructured.Unstructured, error)

// preparers are the Control Plane's side of the command table (protocol.Commands): one per row.
var preparers = map[string]preparer{
	protocol.Deploy:    prepareDeploy,
	protocol.Rollout:   prepareRollout,
	protocol.Upgrade:   prepareUpgrade,
	protocol.Uninstall: prepareUninstall,
	protocol.Preview:   prepareDeploy, // the same manifests a deploy takes, checked the same way
}

// submit prepares, checks and queues a command, and answers 201 {"id"}.
func (s *Server) submit(w http.ResponseWriter, r *http.Request, req commandRequest) error {
	id, err := s.place(r, req)
	if err != nil {
		return err
	}
	auditOf(r).commandID = id
	writeJSON(w, http.StatusCreated, map[string]string{"id": id})
	return nil
}

// place prepares, checks and queues a command in the request's transaction and returns its id.
// Through a stage the checks are: the environment's and the stage's freezes, ownership, the
// entitlement, and for a deploy or preview of a revision, its compatibility with what the
// environment reported.
func (s *Server) place(r *http.Request, req commandRequest) (string, error) {
	ctx := r.Context()
	if req.cmd.Type == protocol.WorkloadConfig {
		return "", fail(http.StatusBadRequest, "legacy workload configuration is not supported by Managers of this protocol: deploy the equivalent nexo.io objects (NexoProxy, NexoPipeline, NexoDeploymentProfile, steps) instead")
	}
	row, ok := protocol.CommandTypeOf(req.cmd.Type)
	if !ok {
		return "", fail(http.StatusBadRequest, "unknown command type %q: use %s", truncate(req.cmd.Type, 40), strings.Join(protocol.CommandNames(), ", "))
	}
	if p := req.stage; p != nil && row.CarriesProxies {
		if err := s.refuseFrozen(ctx, p.tenant, req.env.ID, p.stage.Project, p.stage.Name); err != nil {
			return "", err
		}
	}
	objs, err := preparers[row.Name](s, ctx, &req)
	if err != nil {
		return "", err
	}
	if err := s.refuseLost(ctx, req.env); err != nil {
		return "", err
	}
	rep, err := s.lastReport(ctx, req.env.ID)
	if err != nil {
		return "", err
	}
	if err := advertised(req.env, rep, row); err != nil {
		return "", err
	}
	origin := storage.Origin{}
	if p := req.stage; p != nil {
		origin = p.origin()
		if err := s.ownedByProject(ctx, req.env.ID, *p, objs); err != nil {
			return "", err
		}
		if row.MayAddProxies {
			if err := s.entitled(ctx, p.tenant, req.env.ID, objs); err != nil {
				return "", err
			}
		}
		if req.revision != nil {
			if err := compatible(r, req, rep, objs); err != nil {
				return "", err
			}
		}
	}
	id, err := s.queue(r, req.env, row, req.cmd, objs, origin)
	if err != nil {
		return "", err
	}
	return id, s.recordChange(r, req, id)
}

// report is what an environment's Manager said in its last heartbeat: its capabilities and the
// rest of the heartbeat (no proxies). heard is false when it never sent one.
type report struct {
	heard bool
	caps  []string
	hb    protocol.Heartbeat
}

// lastReport reads the environment's last heartbeat once for every check that reads it
// (advertised, compatible).
func (s *Server) lastReport(ctx context.Context, envID string) (report, error) {
	caps, heard, err := s.cfg.Store.Capabilities(ctx, envID)
	if err != nil || !heard {
		return report{}, err
	}
	rep := report{heard: true, caps: caps}
	_, body, err := s.cfg.Store.LastHeartbeat(ctx, envID)
	if err != nil {
		return rep, err
	}
	if err := json.Unmarshal([]byte(body), &rep.hb); err != nil {
		return rep, fmt.Errorf("stored heartbeat of %s: %w", envID, err)
	}
	return rep, nil
}

// advertised refuses (409) a command whose capability the environment's last heartbeat did not
// advertise: its Manager would not run it. An environment never heard from is not refused: its
// Manager's first heartbeat delivers the command, and a Manager acknowledges a command type it
// does not know as failed.
func advertised(env storage.Environment, rep report, row protocol.CommandType) error {
	if !rep.heard || slices.Contains(rep.caps, row.Capability) {
		return nil
	}
	version := orElse(rep.hb.ManagerVersion, "an unknown version")
	return fail(http.StatusConflict, "environment %s's Manager (%s) does not advertise %s, so it cannot run a %s command; nothing was queued. Upgrade the Nexo Edge installation in that cluster (nexoctl install, helm upgrade or the OLM subscription), then send the command again",
		env.ID, truncate(version, 80), row.Capability, row.Name)
}

// prepareDeploy decodes a deploy's manifests: nexo.io kinds with a valid name, each in one of
// the command's namespaces.
func prepareDeploy(_ *Server, _ context.Context, req *commandRequest) ([]*unstructured.Unstructured, error) {
	c := &req.cmd
	if len(c.Namespaces) == 0 || len(c.Manifests) == 0 {
		return nil, fail(http.StatusBadRequest, "%s needs namespaces and manifests", c.Type)
	}
	objs := make([]*unstructured.Unstructured, 0, len(c.Manifests))
	for i, raw := range c.Manifests {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw); err != nil {
			return nil, fail(http.StatusBadRequest, "manifest %d is not a Kubernetes object (apiVersion, kind and metadata, spelled exactly): %s", i, truncate(err.Error(), 200))
		}
		if _, ok := catalog.Lookup(u.GetKind()); !ok || u.GetAPIVersion() != catalog.Group+"/"+catalog.Version {
			return nil, fail(http.StatusBadRequest, "manifest %d is %q %q: only nexo.io kinds are deployed, as %s/%s (apiVersion and kind, spelled exactly)", i, truncate(u.GetAPIVersion(), 60), truncate(u.GetKind(), 60), catalog.Group, catalog.Version)
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
}

// prepareRollout returns the NexoProxies of the environment's deployed set (the named one, or
// all; through a stage only its project's, in the namespaces it may deploy to) with
// spec.proxyImage set to the new image; queue signs them again. The Manager holds no signing
// key, and editing a signed object in the cluster would invalidate its signature. An
// uninstalled proxy has left the deployed set, so a rollout never re-creates it.
func prepareRollout(s *Server, ctx context.Context, req *commandRequest) ([]*unstructured.Unstructured, error) {
	c := &req.cmd
	if c.Image == "" {
		return nil, fail(http.StatusBadRequest, "rollout needs an image")
	}
	proxies, err := s.cfg.Store.Desired(ctx, req.env.ID, "NexoProxy")
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	for _, d := range proxies {
		if c.Proxy != nil && (c.Proxy.Namespace != d.Namespace || c.Proxy.Name != d.Name) {
			continue
		}
		if p := req.stage; p != nil && (d.Origin.Project != p.stage.Project || !slices.Contains(p.deployable(req.env.ID), d.Namespace)) {
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
	if p := req.stage; p != nil && len(objs) == 0 {
		return nil, fail(http.StatusConflict, "project %s has no NexoProxy deployed in environment %s inside stage %s's deployable namespace targets: nothing to roll out", p.stage.Project, req.env.ID, p.stage.Name)
	}
	return objs, nil
}

// prepareUpgrade needs the target version.
func prepareUpgrade(_ *Server, _ context.Context, req *commandRequest) ([]*unstructured.Unstructured, error) {
	if req.cmd.TargetVersion == "" {
		return nil, fail(http.StatusBadRequest, "upgrade needs a targetVersion")
	}
	return nil, nil
}

// prepareUninstall needs the proxy; through a stage, one of the project's own deployed proxies.
func prepareUninstall(s *Server, ctx context.Context, req *commandRequest) ([]*unstructured.Unstructured, error) {
	p := req.cmd.Proxy
	if p == nil || p.Namespace == "" || p.Name == "" {
		return nil, fail(http.StatusBadRequest, "uninstall needs a proxy {namespace, name}")
	}
	if req.stage == nil {
		return nil, nil
	}
	o, deployed, err := s.cfg.Store.DesiredOrigin(ctx, req.env.ID, "NexoProxy", p.Namespace, p.Name)
	switch {
	case err != nil:
		return nil, err
	case !deployed:
		return nil, fail(http.StatusNotFound, "NexoProxy %s/%s is not deployed in environment %s", p.Namespace, p.Name, req.env.ID)
	case o.Project != req.stage.stage.Project:
		return nil, fail(http.StatusConflict, "NexoProxy %s/%s in environment %s belongs to %s: project %s may not uninstall it", p.Namespace, p.Name, req.env.ID, ownerName(o), req.stage.stage.Project)
	}
	return nil, nil
}

// sign signs u for claims, in place.
func sign(key ed25519.PrivateKey, u *unstructured.Unstructured, claims signature.Claims) (json.RawMessage, error) {
	if err := signature.Sign(u, key, claims); err != nil {
		return nil, err
	}
	return u.MarshalJSON()
}

// queue signs objs (a deploy's manifests, a rollout's proxies) for env at the command's
// sequence number and queues the command, in the request's transaction, and returns its id. Manifests are signed inside the queueing transaction, for this environment (the
// audience) at the command's sequence number (the revision), so a later command always carries
// a higher revision than an earlier one. What the command does to the Control Plane's state is
// its row's: the proxies it carries, whether they count against the entitlement, and whether
// its proxy leaves the deployed set now.
func (s *Server) queue(r *http.Request, env storage.Environment, row protocol.CommandType, c protocol.Command, objs []*unstructured.Unstructured, origin storage.Origin) (string, error) {
	c.ID = "cmd-" + randomID(8)
	key, err := s.activeKey(r.Context())
	if err != nil {
		return "", err
	}
	nc := storage.NewCommand{Env: env.ID, ID: c.ID, Type: c.Type, Origin: origin, Claims: row.CountsAgainstEntitlement}
	if row.CarriesProxies {
		nc.Proxies = commandProxies(c, objs)
	}
	_, err = s.cfg.Store.Enqueue(r.Context(), nc, func(seq int64) (string, error) {
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
		return "", err
	}
	if row.LeavesDeployedSet && c.Proxy != nil {
		// The proxy leaves the deployed set now: a rollout queued after this never re-creates it.
		if err := s.cfg.Store.Forget(r.Context(), env.ID, "NexoProxy", c.Proxy.Namespace, c.Proxy.Name); err != nil {
			return "", err
		}
	}
	return c.ID, nil
}

// commandProxies are the NexoProxies a command carries: its manifests', or the one it names.
func commandProxies(c protocol.Command, objs []*unstructured.Unstructured) []protocol.ObjectRef {
	var out []protocol.ObjectRef
	for _, u := range objs {
		if u.GetKind() == "NexoProxy" {
			out = append(out, protocol.ObjectRef{Namespace: u.GetNamespace(), Name: u.GetName()})
		}
	}
	if len(objs) == 0 && c.Proxy != nil {
		out = append(out, *c.Proxy)
	}
	return out
}

// deployedObjects lists the manifests of an applied command whose row enters the deployed set.
func deployedObjects(body string) []storage.DesiredObject {
	var c protocol.Command
	if json.Unmarshal([]byte(body), &c) != nil {
		return nil
	}
	if row, ok := protocol.CommandTypeOf(c.Type); !ok || !row.EntersDeployedSet {
		return nil
	}
	var out []storage.DesiredObject
	for _, raw := range c.Manifests {
		u := &unstructured.Unstructured{}
		if u.UnmarshalJSON(raw) != nil {
			continue
		}
		out = append(out, storage.DesiredObject{Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName(), Manifest: string(raw)})
	}
	return out
}

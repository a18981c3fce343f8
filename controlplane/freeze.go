// Freezes and environment health (docs/controlplane.md, "Change management"): a tenant admin
// freezes an environment, a tenant admin or project manager a stage, with a reason and an
// optional end; until it is lifted (or ends) deploys, rollbacks, promotions, rollouts and
// uninstalls through stages are refused with that reason. Previews still run: they change
// nothing. Every role of a tenant reads its environments' health.

package controlplane

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode"

	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/controlplane/authz"
	"github.com/nexo-io/nexo-edge/controlplane/storage"
)

// FreezeRequest is a freeze's reason and optional end (RFC 3339).
type FreezeRequest struct {
	Reason string     `json:"reason"`
	Until  *time.Time `json:"until,omitempty"`
}

const maxFreezeReason = 300

func (s *Server) decodeFreeze(r *http.Request) (FreezeRequest, error) {
	var req FreezeRequest
	if err := decode(r, &req, smallBody); err != nil {
		return req, err
	}
	req.Reason = strings.TrimSpace(req.Reason)
	switch {
	case req.Reason == "":
		return req, fail(http.StatusBadRequest, "a freeze needs a reason: it is what every refused change says")
	case len([]rune(req.Reason)) > maxFreezeReason || strings.IndexFunc(req.Reason, func(c rune) bool { return !unicode.IsPrint(c) }) >= 0:
		return req, fail(http.StatusBadRequest, "a freeze's reason is at most %d printable characters", maxFreezeReason)
	case req.Until != nil && !req.Until.After(s.now()):
		return req, fail(http.StatusBadRequest, "the freeze's end (until) %s is not in the future", req.Until.UTC().Format(time.RFC3339))
	}
	return req, nil
}

// freezeEnvironment is PUT /admin/tenants/{tenant}/environments/{env}/freeze {"reason", "until"};
// DELETE lifts it.
func (s *Server) freezeEnvironment(w http.ResponseWriter, r *http.Request, c authz.Caller) error {
	env, err := s.tenantEnvironment(r)
	if err != nil {
		return err
	}
	return s.setFreeze(w, r, c, storage.FreezeEnvironment, env)
}

func (s *Server) thawEnvironment(w http.ResponseWriter, r *http.Request, _ authz.Caller) error {
	env, err := s.tenantEnvironment(r)
	if err != nil {
		return err
	}
	return s.liftFreeze(w, r, storage.FreezeEnvironment, env)
}

// freezeStage is PUT .../projects/{project}/stages/{stage}/freeze; DELETE lifts it.
func (s *Server) freezeStage(w http.ResponseWriter, r *http.Request, c authz.Caller) error {
	p, err := s.stageTargets(r)
	if err != nil {
		return err
	}
	return s.setFreeze(w, r, c, storage.FreezeStage, p.stage.Project+"/"+p.stage.Name)
}

func (s *Server) thawStage(w http.ResponseWriter, r *http.Request, _ authz.Caller) error {
	p, err := s.stageTargets(r)
	if err != nil {
		return err
	}
	return s.liftFreeze(w, r, storage.FreezeStage, p.stage.Project+"/"+p.stage.Name)
}

func (s *Server) setFreeze(w http.ResponseWriter, r *http.Request, c authz.Caller, scope, target string) error {
	req, err := s.decodeFreeze(r)
	if err != nil {
		return err
	}
	f := storage.Freeze{Tenant: r.PathValue("tenant"), Scope: scope, Target: target, Reason: req.Reason, Until: req.Until, By: c.Actor()}
	if err := s.cfg.Store.SetFreeze(r.Context(), f); err != nil {
		return err
	}
	auditOf(r).reason = "frozen: " + req.Reason
	f.Created = s.now().UTC()
	writeJSON(w, http.StatusOK, f)
	return nil
}

func (s *Server) liftFreeze(w http.ResponseWriter, r *http.Request, scope, target string) error {
	lifted, err := s.cfg.Store.LiftFreeze(r.Context(), r.PathValue("tenant"), scope, target)
	if err != nil {
		return err
	}
	if !lifted {
		return fail(http.StatusNotFound, "%s %s is not frozen", scope, target)
	}
	auditOf(r).reason = "freeze lifted"
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// refuseFrozen refuses (409, with the freeze's reason) a change to env through project's stage
// while the environment or the stage is frozen.
func (s *Server) refuseFrozen(ctx context.Context, tenant, env, project, stage string) error {
	freezes, err := s.cfg.Store.Freezes(ctx, tenant, s.now())
	if err != nil {
		return err
	}
	for _, f := range freezes {
		if (f.Scope == storage.FreezeEnvironment && f.Target == env) || (f.Scope == storage.FreezeStage && f.Target == project+"/"+stage) {
			until := "until lifted"
			if f.Until != nil {
				until = "until " + f.Until.UTC().Format(time.RFC3339) + " or lifted"
			}
			return fail(http.StatusConflict, "%s %s is frozen (%s, by %s since %s, %s): nothing was queued; a change goes in once the freeze is lifted (DELETE …/freeze)",
				f.Scope, f.Target, f.Reason, f.By, f.Created.UTC().Format(time.RFC3339), until)
		}
	}
	return nil
}

// EnvironmentHealth is what every role of a tenant sees of one of its environments.
type EnvironmentHealth struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Health
	ManagerVersion string           `json:"managerVersion,omitempty"`
	BundleVersion  string           `json:"bundleVersion,omitempty"`
	InstalledBy    string           `json:"installedBy,omitempty"`
	Kubernetes     string           `json:"kubernetesVersion,omitempty"`
	Limits         *protocol.Limits `json:"limits,omitempty"`
	// PromotionContract: its Manager reports what compatibility checks read.
	PromotionContract bool             `json:"promotionContract"`
	Freezes           []storage.Freeze `json:"freezes"`
}

// environmentHealth is GET /admin/tenants/{tenant}/environments/{env}/health.
func (s *Server) environmentHealth(w http.ResponseWriter, r *http.Request, _ authz.Caller) error {
	envID, err := s.tenantEnvironment(r)
	if err != nil {
		return err
	}
	env, err := s.cfg.Store.Environment(r.Context(), envID)
	if err != nil {
		return err
	}
	h, body, err := s.health(r.Context(), envID, s.now())
	if err != nil {
		return err
	}
	out := EnvironmentHealth{ID: env.ID, Name: env.Name, Health: h, Freezes: []storage.Freeze{}}
	if body != "" {
		var hb protocol.Heartbeat
		if err := json.Unmarshal([]byte(body), &hb); err != nil {
			return fmt.Errorf("stored heartbeat of %s: %w", envID, err)
		}
		out.ManagerVersion, out.BundleVersion, out.InstalledBy, out.Kubernetes, out.Limits = hb.ManagerVersion, hb.BundleVersion, hb.InstalledBy, hb.Cluster.KubernetesVersion, hb.Limits
		for _, c := range hb.Capabilities {
			out.PromotionContract = out.PromotionContract || c == protocol.CapPromotionContract
		}
	}
	freezes, err := s.cfg.Store.Freezes(r.Context(), r.PathValue("tenant"), s.now())
	if err != nil {
		return err
	}
	for _, f := range freezes {
		if f.Scope == storage.FreezeEnvironment && f.Target == envID {
			out.Freezes = append(out.Freezes, f)
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// The command routes: the admin token's POST /admin/environments/{env}/commands, and a
// project stage's deploy, rollout and uninstall. Each decodes its request, decides the stage's
// row for the environment (stageRow), and hands the command to submit (commands.go): one
// prepare → check → queue path for all of them.

package controlplane

import (
	"context"
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/controlplane/authz"
	"github.com/nexo-io/nexo-edge/controlplane/storage"
)

// ownedByProject refuses (409) objects of a command through a stage that the deployed set holds
// for another project, or for the admin token's commands: a project replaces only its own.
func (s *Server) ownedByProject(ctx context.Context, envID string, p stagePlan, objs []*unstructured.Unstructured) error {
	for _, u := range objs {
		o, deployed, err := s.cfg.Store.DesiredOrigin(ctx, envID, u.GetKind(), u.GetNamespace(), u.GetName())
		if err != nil {
			return err
		}
		if deployed && o.Project != p.stage.Project {
			return fail(http.StatusConflict, "%s %s/%s in environment %s belongs to %s: project %s may not replace it",
				u.GetKind(), u.GetNamespace(), u.GetName(), envID, ownerName(o), p.stage.Project)
		}
	}
	return nil
}

func ownerName(o storage.Origin) string {
	if o.Project == "" {
		return "the platform admin (deployed outside any project)"
	}
	return "project " + o.Project
}

// StageRollout is a rollout through a project stage.
type StageRollout struct {
	Environment string `json:"environment"`
	Image       string `json:"image"`
}

// rolloutThroughStage is POST .../stages/{stage}/rollout {"environment", "image"}: the
// environment must be eligible for the stage, and the image's repository among those its
// cluster last reported a rollout may set. It re-signs the project's own NexoProxies in the
// namespace targets the stage may deploy to, and nothing else.
func (s *Server) rolloutThroughStage(w http.ResponseWriter, r *http.Request, _ authz.Caller) error {
	var req StageRollout
	if err := decode(r, &req, smallBody); err != nil {
		return err
	}
	repo, err := protocol.ImageRepository(req.Image)
	if err != nil {
		return fail(http.StatusBadRequest, "image %q: %v", truncate(req.Image, 200), err)
	}
	env, plan, err := s.stageRow(r, req.Environment, "")
	if err != nil {
		return err
	}
	switch limits := plan.limits(env.ID); {
	case limits == nil:
		return fail(http.StatusConflict, "environment %s is eligible, but its cluster has not reported which image repositories a rollout may set", env.ID)
	case !limits.AllowsImage(req.Image):
		return fail(http.StatusConflict, "eligible, refused by the cluster: %s is not among the image repositories environment %s allows (%s)", repo, env.ID, strings.Join(limits.ImageRepositories, ", "))
	}
	c := protocol.Command{Type: protocol.Rollout, Image: req.Image}
	return s.submit(w, r, commandRequest{env: env, cmd: c, stage: &plan})
}

// StageUninstall is an uninstall through a project stage.
type StageUninstall struct {
	Environment string `json:"environment"`
	Namespace   string `json:"namespace"`
	Name        string `json:"name"`
}

// uninstallThroughStage is POST .../stages/{stage}/uninstall {"environment", "namespace",
// "name"}: one NexoProxy of the project's own, in a namespace target the stage may deploy to.
func (s *Server) uninstallThroughStage(w http.ResponseWriter, r *http.Request, _ authz.Caller) error {
	var req StageUninstall
	if err := decode(r, &req, smallBody); err != nil {
		return err
	}
	if err := validName("namespace", req.Namespace); err != nil {
		return err
	}
	if errs := validation.IsDNS1123Subdomain(req.Name); len(errs) > 0 {
		return fail(http.StatusBadRequest, "the NexoProxy's name is not a name: %s", strings.Join(errs, "; "))
	}
	env, plan, err := s.stageRow(r, req.Environment, req.Namespace)
	if err != nil {
		return err
	}
	c := protocol.Command{Type: protocol.Uninstall, Proxy: &protocol.ObjectRef{Namespace: req.Namespace, Name: req.Name}}
	return s.submit(w, r, commandRequest{env: env, cmd: c, stage: &plan})
}

// enqueue is POST /admin/environments/{env}/commands: the admin token's command, which skips
// the stage checks (not the Manager's, nor the cluster's).
func (s *Server) enqueue(w http.ResponseWriter, r *http.Request) error {
	env, err := s.pathEnvironment(r)
	if err != nil {
		return err
	}
	var c protocol.Command
	if err := decode(r, &c, manifestBody); err != nil {
		return err
	}
	return s.submit(w, r, commandRequest{env: env, cmd: c})
}

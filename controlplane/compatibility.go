// The compatibility gate (docs/controlplane.md, "Change management"): before a revision is
// queued to an environment (a deploy, a preview, a rollback, a promotion), its objects are
// checked against what the environment's Manager last reported of its installed bundle (the
// promotion contract): every kind installed there, none schema-only there, and every pipeline
// step in a slot that environment's NexoPipeline accepts it in. An environment whose Manager does
// not report the promotion contract (0.2.0) has unknown compatibility: only a project manager
// or a tenant admin may override that, and the override is audited.

package controlplane

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/contract/protocol"
)

// compatible refuses (409) a revision the environment cannot run, naming the kind, the slot and
// the environment's bundle; with unknown compatibility it refuses unless the request overrides
// (mayOverride checked that its caller may). An environment whose Manager never reported is not
// refused, as a command's capability is not (advertised): the record says it was not checked.
func compatible(r *http.Request, req commandRequest, rep report, objs []*unstructured.Unstructured) error {
	env, hb := req.env.ID, rep.hb
	if !rep.heard {
		// As for a command's capability (advertised): an environment never heard from is not
		// refused; its Manager checks every object when it applies, and the record says so.
		addReason(r, fmt.Sprintf("compatibility with %s not checked: its Manager has not reported yet", env))
		return nil
	}
	if !slices.Contains(rep.caps, protocol.CapPromotionContract) {
		manager := fmt.Sprintf("(%s) does not report the promotion contract (%s)", orElse(hb.ManagerVersion, "unknown"), protocol.CapPromotionContract)
		if !req.override {
			return fail(http.StatusConflict, "compatibility unknown: environment %s's Manager %s, so this Control Plane cannot check that it runs revision %d; nothing was queued. Upgrade its installation, or a project manager sends the request again with overrideCompatibility",
				env, manager, req.revision.Number)
		}
		// mayOverride authorized the override when the request was read.
		addReason(r, fmt.Sprintf("compatibility with %s unknown (its Manager %s): overridden by %s", env, manager, req.caller.Actor()))
		return nil
	}
	bundle := fmt.Sprintf("bundle %s, installed by %s", orElse(hb.BundleVersion, "unknown"), orElse(hb.InstalledBy, "unknown"))
	for _, u := range objs {
		kind := u.GetKind()
		switch {
		case !slices.Contains(hb.InstalledKinds, kind):
			return fail(http.StatusConflict, "revision %d uses %s (%s), which environment %s does not install (%s); nothing was queued: upgrade that installation first",
				req.revision.Number, kind, objectID(u), env, bundle)
		case slices.Contains(hb.SchemaOnlyKinds, kind):
			return fail(http.StatusConflict, "revision %d uses %s (%s), which is schema-only in environment %s (%s): its operator stores such objects and never runs them; nothing was queued",
				req.revision.Number, kind, objectID(u), env, bundle)
		}
		if kind != "NexoPipeline" {
			continue
		}
		p := &nexov1alpha1.NexoPipeline{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, p); err != nil {
			return fail(http.StatusBadRequest, "%s is not a valid NexoPipeline: %s", objectID(u), truncate(err.Error(), 200))
		}
		for _, ref := range p.Refs() {
			accepted := hb.PipelineKinds[string(ref.Slot)]
			if !slices.Contains(accepted, ref.Kind) {
				return fail(http.StatusConflict, "revision %d: NexoPipeline %s/%s puts %s in slot %s, which environment %s's NexoPipeline does not accept there (%s; it accepts %s); nothing was queued",
					req.revision.Number, u.GetNamespace(), u.GetName(), ref.Kind, ref.Slot, env, bundle, orElse(strings.Join(accepted, ", "), "unknown"))
			}
		}
	}
	return nil
}

// addReason appends text to the reason the request's allowed record gives.
func addReason(r *http.Request, text string) {
	if e := auditOf(r); e.reason == "" {
		e.reason = text
	} else {
		e.reason += "; " + text
	}
}

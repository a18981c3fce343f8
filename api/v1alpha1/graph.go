package v1alpha1

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GraphRef is one object a proxy's graph references: its role, kind and name, where it is
// referenced from (for messages), and its depth (1: the proxy's own references, 2: the
// pipeline's).
// +kubebuilder:object:generate=false
type GraphRef struct {
	Role  string // pipeline, router, request, response, connection, observability, profile, license
	Kind  string
	Name  string
	Where string // spec.pipelineRef, NexoPipeline p request[0] NexoRateLimit/r, spec.observabilityRefs[0], …
	Depth int
}

// Graph is the proxy's references in the order the operator resolves them: the pipeline; then,
// when the pipeline was read (not nil), its router and steps in pipeline order; the
// observability objects; the profile; the license. The operator, nexoctl status and preflight
// walk a proxy's graph with it and nothing else.
func (p *NexoProxy) Graph(pipeline *NexoPipeline) []GraphRef {
	out := []GraphRef{{Role: "pipeline", Kind: "NexoPipeline", Name: p.Spec.PipelineRef.Name, Where: "spec.pipelineRef", Depth: 1}}
	if pipeline != nil {
		for _, r := range pipeline.Refs() {
			out = append(out, GraphRef{Role: string(r.Slot), Kind: r.Kind, Name: r.Name, Where: "NexoPipeline " + pipeline.Name + " " + r.String(), Depth: 2})
		}
	}
	for i, r := range p.Spec.ObservabilityRefs {
		out = append(out, GraphRef{Role: "observability", Kind: r.Kind, Name: r.Name, Where: fmt.Sprintf("spec.observabilityRefs[%d]", i), Depth: 1})
	}
	return append(out,
		GraphRef{Role: "profile", Kind: "NexoDeploymentProfile", Name: p.Spec.ProfileRef.Name, Where: "spec.profileRef", Depth: 1},
		GraphRef{Role: "license", Kind: "NexoLicense", Name: p.Spec.LicenseRef.Name, Where: "spec.licenseRef", Depth: 1})
}

// ReadyAndCurrent is the one rule for "Ready for the current generation": the Ready condition
// is True and was computed for the object's current generation (the condition's own
// observedGeneration), so a spec edit makes the object not Ready until its controller has looked
// at it. It returns the Ready condition too (nil when there is none).
func ReadyAndCurrent(obj Object) (bool, *metav1.Condition) {
	c := meta.FindStatusCondition(obj.NexoStatus().Conditions, ConditionReady)
	if c == nil {
		return false, nil
	}
	return c.Status == metav1.ConditionTrue && c.ObservedGeneration == obj.GetGeneration(), c
}

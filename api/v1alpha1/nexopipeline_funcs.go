package v1alpha1

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nexo-io/nexo-edge/catalog"
)

// PipelineRef is one reference of a pipeline, with where it sits.
// +kubebuilder:object:generate=false
type PipelineRef struct {
	Slot  catalog.Slot
	Index int // -1 for the router
	Kind  string
	Name  string
}

// Path is the reference's field path in the pipeline (spec.router, spec.request[0]).
func (r PipelineRef) Path() *field.Path {
	p := field.NewPath("spec", string(r.Slot))
	if r.Index >= 0 {
		p = p.Index(r.Index)
	}
	return p
}

// Position is where the reference sits: "router", "request[0]".
func (r PipelineRef) Position() string {
	if r.Index < 0 {
		return string(r.Slot)
	}
	return fmt.Sprintf("%s[%d]", r.Slot, r.Index)
}

func (r PipelineRef) String() string { return r.Position() + " " + r.Kind + "/" + r.Name }

// Refs lists the pipeline's references in pipeline order: router, request, response, connection.
func (p *NexoPipeline) Refs() []PipelineRef {
	var out []PipelineRef
	if r := p.Spec.Router; r != nil {
		out = append(out, PipelineRef{catalog.SlotRouter, -1, r.Kind, r.Name})
	}
	for i, r := range p.Spec.Request {
		out = append(out, PipelineRef{catalog.SlotRequest, i, r.Kind, r.Name})
	}
	for i, r := range p.Spec.Response {
		out = append(out, PipelineRef{catalog.SlotResponse, i, r.Kind, r.Name})
	}
	for i, r := range p.Spec.Connection {
		out = append(out, PipelineRef{catalog.SlotConnection, i, r.Kind, r.Name})
	}
	return out
}

// Validate checks every reference's kind against the catalog: a Nexo kind, allowed in its slot,
// and reconciled by this build (the CRD's per-slot enums admit schema-only kinds).
func (p *NexoPipeline) Validate() field.ErrorList {
	var errs field.ErrorList
	for _, ref := range p.Refs() {
		if err := CheckRefKind(ref.Path().Child("kind"), ref.Slot, ref.Kind); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// CheckRefKind checks a referenced kind against the catalog: known, allowed in slot, and
// reconciled by this build. See ReasonFor for the reasons of its errors.
func CheckRefKind(path *field.Path, slot catalog.Slot, kind string) *field.Error {
	k, ok := catalog.Lookup(kind)
	switch {
	case !ok || !k.AllowedIn(slot):
		return field.NotSupported(path, kind, catalog.InSlot(slot))
	case k.Support != catalog.Reconciled:
		return field.Forbidden(path, catalog.UnsupportedMessage(kind))
	}
	return nil
}

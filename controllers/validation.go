package controllers

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/catalog"
)

// Reasons of a Ready=False condition on a component.
const (
	ReasonValid                = "Valid"
	ReasonInvalidSpec          = "InvalidSpec"
	ReasonInvalidReference     = "InvalidReference"
	ReasonUnsupportedReference = "UnsupportedReference"
	ReasonUnsigned             = "Unsigned"
	ReasonUnknownSigningKey    = "UnknownSigningKey"
	ReasonSignatureMismatch    = "SignatureMismatch"
	ReasonSigned               = "Signed"
	ReasonSignatureReplayed    = "SignatureReplayed"
	ReasonWrongAudience        = "WrongAudience"
)

// invalid is a Go-side validation failure: a condition reason and a message saying what to fix.
type invalid struct{ reason, message string }

func (e *invalid) Error() string { return e.message }

// validators hold the checks the CRD schema cannot express, per kind. Kinds without an entry
// are valid once admitted.
var validators = map[string]func(nexov1alpha1.Object) *invalid{
	"NexoPipeline":     func(o nexov1alpha1.Object) *invalid { return validatePipeline(o.(*nexov1alpha1.NexoPipeline)) },
	"NexoRouter":       func(o nexov1alpha1.Object) *invalid { return validateRouter(o.(*nexov1alpha1.NexoRouter)) },
	"NexoTrafficSplit": func(o nexov1alpha1.Object) *invalid { return validateTrafficSplit(o.(*nexov1alpha1.NexoTrafficSplit)) },
	"NexoAuthPolicy":   func(o nexov1alpha1.Object) *invalid { return validateAuthPolicy(o.(*nexov1alpha1.NexoAuthPolicy)) },
	"NexoPIIMasking":   func(o nexov1alpha1.Object) *invalid { return validatePIIMasking(o.(*nexov1alpha1.NexoPIIMasking)) },
	"NexoTracing":      func(o nexov1alpha1.Object) *invalid { return validateTracing(o.(*nexov1alpha1.NexoTracing)) },
	"NexoAuditLog":     func(o nexov1alpha1.Object) *invalid { return validateAuditLog(o.(*nexov1alpha1.NexoAuditLog)) },
}

// PipelineRef is one reference of a pipeline, with where it sits.
type PipelineRef struct {
	Slot  catalog.Slot
	Index int // -1 for the router
	Kind  string
	Name  string
}

func (r PipelineRef) String() string {
	if r.Index < 0 {
		return fmt.Sprintf("%s %s/%s", r.Slot, r.Kind, r.Name)
	}
	return fmt.Sprintf("%s[%d] %s/%s", r.Slot, r.Index, r.Kind, r.Name)
}

// PipelineRefs lists a pipeline's references in pipeline order.
func PipelineRefs(p *nexov1alpha1.NexoPipeline) []PipelineRef {
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

// checkRef checks a reference's kind against the catalog: known, allowed in its slot, and
// reconciled by this build.
func checkRef(slot catalog.Slot, where, kind string) *invalid {
	k, ok := catalog.Lookup(kind)
	switch {
	case !ok:
		return &invalid{ReasonInvalidReference, fmt.Sprintf("%s: %s is not a Nexo kind", where, kind)}
	case !k.AllowedIn(slot):
		return &invalid{ReasonInvalidReference, fmt.Sprintf("%s: %s cannot be used in the %s slot; allowed there: %s",
			where, kind, slot, strings.Join(catalog.InSlot(slot), ", "))}
	case k.Support != catalog.Reconciled:
		return &invalid{ReasonUnsupportedReference, fmt.Sprintf("%s: %s", where, catalog.UnsupportedMessage(kind))}
	}
	return nil
}

func validatePipeline(p *nexov1alpha1.NexoPipeline) *invalid {
	var problems []*invalid
	for _, ref := range PipelineRefs(p) {
		if bad := checkRef(ref.Slot, ref.String(), ref.Kind); bad != nil {
			problems = append(problems, bad)
		}
	}
	return join(problems)
}

// join merges problems into one; an invalid reference outranks an unsupported one.
func join(problems []*invalid) *invalid {
	if len(problems) == 0 {
		return nil
	}
	reason := problems[0].reason
	msgs := make([]string, len(problems))
	for i, p := range problems {
		msgs[i] = p.message
		if p.reason == ReasonInvalidReference {
			reason = ReasonInvalidReference
		}
	}
	return &invalid{reason, strings.Join(msgs, "; ")}
}

func validateRouter(r *nexov1alpha1.NexoRouter) *invalid {
	// A route is unreachable when an earlier route already matches all it matches.
	for i, later := range r.Spec.Routes {
		for j, earlier := range r.Spec.Routes[:i] {
			sameDB := earlier.Database == "*" || earlier.Database == later.Database
			covers := len(earlier.Collections) == 0 ||
				(len(later.Collections) > 0 && !slices.ContainsFunc(later.Collections, func(c string) bool { return !slices.Contains(earlier.Collections, c) }))
			if sameDB && covers {
				return &invalid{ReasonInvalidSpec, fmt.Sprintf("routes[%d] can never match: routes[%d] already matches database %q and its collections; reorder or remove it", i, j, later.Database)}
			}
		}
	}
	return nil
}

func validateTrafficSplit(s *nexov1alpha1.NexoTrafficSplit) *invalid {
	seen := map[nexov1alpha1.Address]string{}
	for _, t := range s.Spec.Targets {
		if prev, dup := seen[t.Address]; dup {
			return &invalid{ReasonInvalidSpec, fmt.Sprintf("targets %s and %s share address %s; merge them into one target", prev, t.Name, t.Address)}
		}
		seen[t.Address] = t.Name
	}
	return nil
}

func validateAuthPolicy(a *nexov1alpha1.NexoAuthPolicy) *invalid {
	seen := map[string]int{}
	for i, m := range a.Spec.Mappings {
		id := "username " + m.Username
		if m.CertificateSubject != "" {
			id = "certificateSubject " + m.CertificateSubject
		}
		if j, dup := seen[id]; dup {
			return &invalid{ReasonInvalidSpec, fmt.Sprintf("mappings[%d] repeats %s of mappings[%d] and can never match; remove one", i, id, j)}
		}
		seen[id] = i
	}
	return nil
}

func validatePIIMasking(m *nexov1alpha1.NexoPIIMasking) *invalid {
	seen := map[string]int{}
	for i, r := range m.Spec.Rules {
		if j, dup := seen[r.FieldPattern]; dup {
			return &invalid{ReasonInvalidSpec, fmt.Sprintf("rules[%d] repeats fieldPattern %q of rules[%d]; keep one action per pattern", i, r.FieldPattern, j)}
		}
		seen[r.FieldPattern] = i
	}
	return nil
}

// credentialsInURL catches objects stored before the CRD refused credentials in URLs (seed 004:
// credentials only through Secret references). The message never repeats the URL.
func credentialsInURL(field, raw, secretField string) *invalid {
	if u, err := url.Parse(raw); err == nil && u.User != nil {
		return &invalid{ReasonInvalidSpec, field + " carries credentials (user:password@); put them in a Secret and name it in " + secretField}
	}
	return nil
}

func validateAuditLog(a *nexov1alpha1.NexoAuditLog) *invalid {
	return credentialsInURL("sink.url", a.Spec.Sink.URL, "sink.authSecretRef")
}

func validateTracing(t *nexov1alpha1.NexoTracing) *invalid {
	if bad := credentialsInURL("endpoint", t.Spec.Endpoint, "headersSecretRef"); bad != nil {
		return bad
	}
	if t.Spec.Protocol == "grpc" {
		rest := t.Spec.Endpoint[strings.Index(t.Spec.Endpoint, "://")+3:]
		if i := strings.Index(rest, "/"); i >= 0 && i < len(rest)-1 {
			return &invalid{ReasonInvalidSpec, "an OTLP gRPC endpoint has no path; remove the path or set protocol: http"}
		}
	}
	return nil
}

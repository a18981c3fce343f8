package v1alpha1_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
)

func TestGraphWalksInResolutionOrder(t *testing.T) {
	p := &v1.NexoProxy{}
	p.Spec.PipelineRef.Name, p.Spec.ProfileRef.Name, p.Spec.LicenseRef.Name = "pipe", "prof", "lic"
	p.Spec.ObservabilityRefs = []v1.ObservabilityRef{{Kind: "NexoMetrics", Name: "m"}}
	pl := &v1.NexoPipeline{}
	pl.Name = "pipe"
	pl.Spec.Router = &v1.RouterRef{Kind: "NexoRouter", Name: "r"}
	pl.Spec.Request = []v1.RequestStepRef{{Kind: "NexoRateLimit", Name: "rl"}}

	var got []string
	for _, r := range p.Graph(pl) {
		got = append(got, r.Role+" "+r.Kind+"/"+r.Name+" @"+r.Where)
	}
	want := []string{
		"pipeline NexoPipeline/pipe @spec.pipelineRef",
		"router NexoRouter/r @NexoPipeline pipe router NexoRouter/r",
		"request NexoRateLimit/rl @NexoPipeline pipe request[0] NexoRateLimit/rl",
		"observability NexoMetrics/m @spec.observabilityRefs[0]",
		"profile NexoDeploymentProfile/prof @spec.profileRef",
		"license NexoLicense/lic @spec.licenseRef",
	}
	if len(got) != len(want) {
		t.Fatalf("graph\n got %q\nwant %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("ref %d: got %q, want %q", i, got[i], want[i])
		}
	}
	// Without the pipeline (not found yet), its references are simply not known.
	if n := len(p.Graph(nil)); n != 4 {
		t.Errorf("graph without the pipeline has %d refs, want 4", n)
	}
}

func TestReadyAndCurrent(t *testing.T) {
	o := &v1.NexoRouter{}
	o.Generation = 3
	if ok, c := v1.ReadyAndCurrent(o); ok || c != nil {
		t.Error("no condition is Ready")
	}
	set := func(status metav1.ConditionStatus, gen int64) {
		o.Status.Conditions = []metav1.Condition{{Type: v1.ConditionReady, Status: status, ObservedGeneration: gen, Reason: "R"}}
	}
	set(metav1.ConditionTrue, 3)
	if ok, _ := v1.ReadyAndCurrent(o); !ok {
		t.Error("Ready for the current generation is not ready")
	}
	set(metav1.ConditionTrue, 2)
	if ok, c := v1.ReadyAndCurrent(o); ok || c == nil {
		t.Error("Ready for an older generation is ready")
	}
	set(metav1.ConditionFalse, 3)
	if ok, _ := v1.ReadyAndCurrent(o); ok {
		t.Error("Ready=False is ready")
	}
}

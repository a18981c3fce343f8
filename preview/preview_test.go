package preview

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/nexo-io/nexo-edge/contract/protocol"
)

// An answer past the limit keeps its counts and drops detail in order, saying what it dropped;
// one within the limit is untouched.
func TestBoundKeepsTheSummary(t *testing.T) {
	big := func(objects, proxies int) *protocol.PreviewResult {
		r := &protocol.PreviewResult{}
		for i := range objects {
			o := protocol.ObjectPreview{Kind: "NexoRateLimit", Namespace: "web", Name: fmt.Sprintf("rl-%05d", i), Outcome: protocol.ObjectUnchanged}
			if i%2 == 0 {
				o.Outcome, o.Changes = protocol.ObjectChanged, []protocol.FieldChange{{Op: "replace", Path: "/spec/operationsPerSecond", Value: strings.Repeat("x", 200)}}
			}
			r.Objects = append(r.Objects, o)
		}
		for i := range proxies {
			r.Proxies = append(r.Proxies, protocol.ProxyPreview{Namespace: "web", Name: fmt.Sprintf("p-%05d", i), Before: "0123456789ab", After: "ba9876543210", Outcome: protocol.ProxyRolls})
		}
		summarize(r)
		return r
	}
	for _, c := range []struct {
		objects, proxies int
		dropped          string
	}{
		{10, 10, ""},
		{2000, 10, "field changes"},
		{6000, 10, "unchanged objects"},
		{20000, 10, "every object"},
		{0, 5000, "unchanged proxies, every proxy"},
	} {
		r := big(c.objects, c.proxies)
		want := r.Summary
		bound(r, protocol.MaxPreviewBytes)
		b, _ := json.Marshal(r)
		switch {
		case len(b) > protocol.MaxPreviewBytes:
			t.Errorf("%d objects, %d proxies: %d bytes, over %d", c.objects, c.proxies, len(b), protocol.MaxPreviewBytes)
		case r.Summary != want:
			t.Errorf("%d objects, %d proxies: the summary changed: %+v → %+v", c.objects, c.proxies, want, r.Summary)
		case c.dropped == "" && r.Truncated != "":
			t.Errorf("%d objects, %d proxies: truncated %q within the limit", c.objects, c.proxies, r.Truncated)
		case c.dropped != "" && !strings.Contains(r.Truncated, c.dropped):
			t.Errorf("%d objects, %d proxies: truncated %q, want it to name %q", c.objects, c.proxies, r.Truncated, c.dropped)
		}
	}
}

// A field diff leaves out what every apply changes: server metadata, status and the signature
// annotations a deploy renews; it keeps every other annotation and every spec field.
func TestFieldChangesLeaveOutWhatEveryApplyChanges(t *testing.T) {
	obj := func(rv, sig string, ops int64, note string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "nexo.io/v1alpha1", "kind": "NexoRateLimit",
			"metadata": map[string]any{"name": "rl", "namespace": "web", "resourceVersion": rv, "generation": int64(3), "uid": "u",
				"annotations": map[string]any{"nexo.io/signature": sig, "nexo.io/signature-revision": sig, "team/note": note}},
			"spec": map[string]any{"operationsPerSecond": ops}, "status": map[string]any{"observedGeneration": int64(3)}}}
		return u
	}
	same, err := fieldChanges(obj("1", "a", 5, "x"), obj("2", "b", 5, "x"))
	if err != nil || len(same) != 0 {
		t.Errorf("a re-signed, re-applied object: %+v %v", same, err)
	}
	changed, _ := fieldChanges(obj("1", "a", 5, "x"), obj("2", "b", 7, "y"))
	if len(changed) != 2 || changed[0].Path != "/metadata/annotations/team~1note" || changed[1].Path != "/spec/operationsPerSecond" {
		t.Errorf("two real changes: %+v", changed)
	}
}

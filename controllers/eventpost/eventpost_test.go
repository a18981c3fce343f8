package eventpost

import (
	"context"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/contract/scheme"
)

func proxy() *nexov1alpha1.NexoProxy {
	return &nexov1alpha1.NexoProxy{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "orders", UID: "u-1", ResourceVersion: "7"}}
}

// The Event names the proxy it is about, carries what the controller said, and no series.
func TestEventDescribesTheProxy(t *testing.T) {
	r := New(nil, scheme.New(), "nexo-operator")
	now := time.Date(2026, 12, 4, 5, 0, 0, 0, time.UTC)
	ev, err := r.event(now, proxy(), nil, corev1.EventTypeWarning, "RolloutStalled", "Rollout", "revision %s stalled", "abc")
	if err != nil {
		t.Fatal(err)
	}
	if ev.Namespace != "team-a" || !strings.HasPrefix(ev.Name, "orders.") {
		t.Errorf("event %s/%s, want team-a/orders.<time>", ev.Namespace, ev.Name)
	}
	if ev.InvolvedObject.Kind != "NexoProxy" || ev.InvolvedObject.Name != "orders" || ev.InvolvedObject.UID != "u-1" || ev.InvolvedObject.APIVersion != nexov1alpha1.GroupVersion.String() {
		t.Errorf("regarding %+v", ev.InvolvedObject)
	}
	if ev.Message != "revision abc stalled" || ev.Reason != "RolloutStalled" || ev.Action != "Rollout" || ev.Type != corev1.EventTypeWarning {
		t.Errorf("note %q reason %q action %q type %q", ev.Message, ev.Reason, ev.Action, ev.Type)
	}
	if ev.ReportingController != "nexo-operator" || !strings.HasPrefix(ev.ReportingInstance, "nexo-operator-") || ev.Series != nil || ev.Count != 1 || !ev.EventTime.Time.Equal(now) || !ev.FirstTimestamp.Time.Equal(now) {
		t.Errorf("reporting %q/%q series %v time %v", ev.ReportingController, ev.ReportingInstance, ev.Series, ev.EventTime)
	}
	if _, err := r.event(now, proxy(), nil, "Fatal", "X", "Y", "z"); err == nil {
		t.Error("an Event of type Fatal was built")
	}
}

// A note over the API's 1 kB limit is cut at a character boundary instead of failing the post.
func TestLongNotesAreCut(t *testing.T) {
	for name, note := range map[string]string{
		"ascii":     strings.Repeat("a", 3000),
		"multibyte": strings.Repeat("é", 1500),
		"at limit":  strings.Repeat("b", NoteLimit),
	} {
		got := truncate(note)
		if len(got) > NoteLimit || !utf8.ValidString(got) {
			t.Errorf("%s: %d bytes, valid UTF-8 %v", name, len(got), utf8.ValidString(got))
		}
		if len(note) > NoteLimit && !strings.HasSuffix(got, "…") || len(note) <= NoteLimit && got != note {
			t.Errorf("%s: cut %q…", name, got[max(0, len(got)-10):])
		}
	}
}

// Eventf never blocks a reconcile: past the queue's length, Events are dropped.
func TestAFullQueueDrops(t *testing.T) {
	r := New(nil, scheme.New(), "nexo-operator")
	done := make(chan struct{})
	go func() {
		for range QueueLength + 10 {
			r.Eventf(proxy(), nil, corev1.EventTypeNormal, "RolloutComplete", "Rollout", "done")
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Eventf blocked on a full queue")
	}
	if len(r.queue) != QueueLength {
		t.Errorf("%d queued, want %d", len(r.queue), QueueLength)
	}
}

// Post creates the Event Eventf would queue, at once, and returns what stopped it.
func TestPostCreatesTheEventNow(t *testing.T) {
	sch := scheme.New()
	c := fake.NewClientBuilder().WithScheme(sch).Build()
	r := New(c, sch, "nexo-operator")
	if err := r.Post(context.Background(), proxy(), nil, corev1.EventTypeNormal, "RolloutComplete", "Rollout", "revision %s", "abc"); err != nil {
		t.Fatal(err)
	}
	var list corev1.EventList
	if err := c.List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Message != "revision abc" || list.Items[0].InvolvedObject.Name != "orders" {
		t.Errorf("events %+v", list.Items)
	}
	if err := r.Post(context.Background(), proxy(), nil, "Fatal", "X", "Y", "z"); err == nil {
		t.Error("an Event of type Fatal was posted")
	}
	if len(r.queue) != 0 {
		t.Errorf("Post queued %d Events", len(r.queue))
	}
}

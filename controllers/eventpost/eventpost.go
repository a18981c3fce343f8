// Package eventpost records Kubernetes Events (core v1, with the reporting fields of the
// events.k8s.io API filled) for controllers whose Events are transitions: each Eventf becomes one
// Event, posted in the background, and nothing is kept once it is posted. They are posted through
// the core API, as client-go's recorder posts them, so the RBAC rule is on core "events": OLM's
// bundle validator reads an events.k8s.io rule as the removed events.k8s.io/v1beta1 API.
// kubectl describe and the events.k8s.io/v1 API show them alike (one storage).
//
// client-go's events broadcaster (what controller-runtime's GetEventRecorder returns) keeps a
// copy of every Event it posts for six minutes, to count repeats into a series. The operator
// never repeats an Event: it emits one only when a proxy's status changes (see the proxy
// controller's recordTransitions), so that cache would only hold about 1 KB per proxy for
// nothing while thousands of proxies converge. The parts client-go shares are used as they are:
// the object reference, the event name and the type check.
package eventpost

import (
	"context"
	"fmt"
	"os"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/record/util"
	"k8s.io/client-go/tools/reference"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// NoteLimit is the longest note the events.k8s.io API accepts (1 kB), kept for core Events too so
// that both APIs read them whole; a longer one is cut at a character boundary and ends in "…".
const NoteLimit = 1024

// QueueLength is how many Events wait for posting before new ones are dropped (and logged), so
// a burst never blocks a reconcile.
const QueueLength = 1000

// Recorder is an events.EventRecorder. Run Start (it is a manager.Runnable) to post.
type Recorder struct {
	client     client.Client
	scheme     *runtime.Scheme
	controller string
	instance   string
	queue      chan *corev1.Event
}

var _ events.EventRecorder = (*Recorder)(nil)

// New records Events reported by controller (events' reportingController; the instance is
// controller-hostname, as client-go names it).
func New(c client.Client, scheme *runtime.Scheme, controller string) *Recorder {
	host, _ := os.Hostname()
	instance := controller + "-" + host
	if len(instance) > 128 { // the API's limit for reportingInstance
		instance = instance[:128]
	}
	return &Recorder{client: c, scheme: scheme, controller: controller, instance: instance, queue: make(chan *corev1.Event, QueueLength)}
}

// Eventf queues one Event about regarding (related may be nil). It never blocks: when the queue
// is full the Event is dropped and logged.
func (r *Recorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	log := logf.Log.WithName("events")
	ev, err := r.event(time.Now(), regarding, related, eventtype, reason, action, note, args...)
	if err != nil {
		log.Error(err, "not recording an Event", "reason", reason)
		return
	}
	select {
	case r.queue <- ev:
	default:
		log.Info("dropped an Event: too many waiting to be posted", "reason", reason, "regarding", ev.InvolvedObject.Name)
	}
}

// Post builds one Event as Eventf does and creates it now, without the queue, returning the
// error (for a caller that counts or times its writes, like make bench's raw baseline).
func (r *Recorder) Post(ctx context.Context, regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) error {
	ev, err := r.event(time.Now(), regarding, related, eventtype, reason, action, note, args...)
	if err != nil {
		return err
	}
	return r.client.Create(ctx, ev)
}

// event builds the Event as client-go's recorder does, without a series.
func (r *Recorder) event(now time.Time, regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) (*corev1.Event, error) {
	ref, err := reference.GetReference(r.scheme, regarding)
	if err != nil {
		return nil, err
	}
	if !util.ValidateEventType(eventtype) {
		return nil, fmt.Errorf("unsupported event type %q", eventtype)
	}
	ev := &corev1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: util.GenerateEventName(ref.Name, now.UnixNano()), Namespace: ref.Namespace},
		InvolvedObject:      *ref,
		Reason:              reason,
		Message:             truncate(fmt.Sprintf(note, args...)),
		Type:                eventtype,
		Source:              corev1.EventSource{Component: r.controller},
		FirstTimestamp:      metav1.NewTime(now),
		LastTimestamp:       metav1.NewTime(now),
		Count:               1,
		EventTime:           metav1.NewMicroTime(now),
		Action:              action,
		ReportingController: r.controller,
		ReportingInstance:   r.instance,
	}
	if ev.Namespace == "" {
		ev.Namespace = metav1.NamespaceDefault
	}
	if related != nil {
		if rel, err := reference.GetReference(r.scheme, related); err == nil {
			ev.Related = rel
		}
	}
	return ev, nil
}

// Start posts queued Events until ctx ends.
func (r *Recorder) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("events")
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev := <-r.queue:
			if err := r.client.Create(ctx, ev); err != nil && !apierrors.IsAlreadyExists(err) {
				log.Error(err, "could not post an Event", "reason", ev.Reason, "regarding", ev.InvolvedObject.Name)
			}
		}
	}
}

// NeedLeaderElection is false: Events are recorded only by what runs, leader or not.
func (r *Recorder) NeedLeaderElection() bool { return false }

// truncate keeps note within NoteLimit bytes, cut at a character boundary.
func truncate(note string) string {
	if len(note) <= NoteLimit {
		return note
	}
	const ellipsis = "…"
	cut := NoteLimit - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(note[cut]) {
		cut--
	}
	return note[:cut] + ellipsis
}

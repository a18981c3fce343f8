package installcmd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nexo-io/nexo-edge/contract/wire"
	"github.com/nexo-io/nexo-edge/nexoctl/cliopts"
	"github.com/nexo-io/nexo-edge/nexoctl/progress"
)

// waitAvailable is install --wait: it reads the components' Deployments in ns every second until
// each has rolled out and is available, within timeout, and shows each on the error stream (a
// line per change off a terminal, drawn in place on one). A Deployment past its progress deadline
// ends the wait at once: waiting longer cannot help.
func waitAvailable(ctx context.Context, o *cliopts.Options, c client.Client, ns string, components []string, timeout time.Duration) error {
	d := progress.Start(o.Err, progress.Options{
		Terminal: o.Output == cliopts.OutputText && o.ErrIsTerminal(),
		Quiet:    o.Output != cliopts.OutputText,
		Title:    fmt.Sprintf("Waiting for %s in %s (up to %s)", strings.Join(components, " and "), ns, timeout),
	})
	var items []progress.Item
	var stalled *progress.Item
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		items = items[:0]
		all := true
		for _, name := range components {
			it, err := deploymentItem(ctx, c, ns, name)
			if err != nil {
				return false, err
			}
			items = append(items, it)
			if it.Failed && stalled == nil {
				stalled = &it
			}
			all = all && it.Done
		}
		d.Set(items)
		return all || stalled != nil, nil
	})
	d.Stop()
	switch {
	case stalled != nil:
		return cliopts.Fail(cliopts.ExitFailed, "Deployment %s/%s will not become available: %s; kubectl -n %s describe deployment %s, and its pods, say why",
			ns, stalled.Name, stalled.Detail, ns, stalled.Name)
	case errors.Is(err, context.DeadlineExceeded):
		var waiting []string
		for _, it := range items {
			if !it.Done {
				waiting = append(waiting, it.Name+" "+it.State+detail(it))
			}
		}
		return cliopts.Fail(cliopts.ExitFailed, "not available within %s: %s; nexoctl preflight -n %s shows what is missing", timeout, strings.Join(waiting, ", "), ns)
	case err != nil:
		return cliopts.Fail(cliopts.ExitFailed, "waiting for the Deployments: %v", err)
	}
	return nil
}

func detail(it progress.Item) string {
	if it.Detail == "" {
		return ""
	}
	return " (" + it.Detail + ")"
}

// deploymentItem is a Deployment's rollout as a progress item: done when its latest generation
// is observed, every replica updated and available (kubectl rollout status's rule), failed when
// it is past its progress deadline.
func deploymentItem(ctx context.Context, c client.Client, ns, name string) (progress.Item, error) {
	dep := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, dep); apierrors.IsNotFound(err) {
		return progress.Item{Name: name, State: "not created yet"}, nil
	} else if err != nil {
		return progress.Item{}, fmt.Errorf("read Deployment %s/%s: %s", ns, name, apierrors.ReasonForError(err))
	}
	want := int32(1)
	if dep.Spec.Replicas != nil {
		want = *dep.Spec.Replicas
	}
	st := dep.Status
	it := progress.Item{Name: name, State: fmt.Sprintf("%d/%d available", st.AvailableReplicas, want)}
	it.Done = st.ObservedGeneration >= dep.Generation && st.UpdatedReplicas == want && st.Replicas == want && st.AvailableReplicas >= want
	if it.Done {
		return it, nil
	}
	for _, cond := range st.Conditions {
		switch {
		case cond.Type == appsv1.DeploymentProgressing && cond.Reason == "ProgressDeadlineExceeded":
			it.Failed, it.Detail = true, cond.Reason+": "+cond.Message
			return it, nil
		case cond.Type == appsv1.DeploymentAvailable && cond.Status == corev1.ConditionFalse,
			cond.Type == appsv1.DeploymentReplicaFailure && cond.Status == corev1.ConditionTrue:
			it.Detail = cond.Reason + ": " + cond.Message
		}
	}
	if st.UpdatedReplicas < want && it.Detail == "" {
		it.Detail = fmt.Sprintf("%d of %d replicas updated", st.UpdatedReplicas, want)
	}
	return it, nil
}

// components are the Deployments an installation runs: the operator, and the Manager unless the
// chart's manager.enabled is false.
func components(vals map[string]any) []string {
	out := []string{wire.OperatorName}
	if m, ok := vals["manager"].(map[string]any); ok {
		if enabled, set := m["enabled"].(bool); set && !enabled {
			return out
		}
	}
	return append(out, wire.ManagerName)
}

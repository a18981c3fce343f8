package manager

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/nexo-io/nexo-edge/contract/wire"
)

// LeaseTimings are the leader-election settings of the Manager's Lease.
type LeaseTimings struct {
	Duration, RenewDeadline, RetryPeriod time.Duration
}

// DefaultLeaseTimings take over from a killed Manager within about 15 seconds.
var DefaultLeaseTimings = LeaseTimings{Duration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}

// RunElected runs run only while this process holds the Manager's Lease in namespace, so two
// Managers (a rolling update, replicas: 2, a stuck old pod) never apply commands side by side.
// When the Lease is lost, run's context is cancelled and RunElected returns: the process should
// exit and be restarted rather than continue without the Lease.
func RunElected(ctx context.Context, cs kubernetes.Interface, namespace, identity string, t LeaseTimings, log logr.Logger, run func(context.Context)) {
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metaFor(namespace),
		Client:     cs.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
	}
	leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
		Lock: lock, ReleaseOnCancel: true, Name: wire.ManagerLease,
		LeaseDuration: t.Duration, RenewDeadline: t.RenewDeadline, RetryPeriod: t.RetryPeriod,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				log.Info("holding the Manager Lease; this Manager is active", "identity", identity)
				run(ctx)
			},
			OnStoppedLeading: func() { log.Info("stopped holding the Manager Lease", "identity", identity) },
		},
	})
}

func metaFor(namespace string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: namespace, Name: wire.ManagerLease}
}

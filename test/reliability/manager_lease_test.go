package reliability_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/contract/wire"
	"github.com/nexo-io/nexo-edge/manager"
	"github.com/nexo-io/nexo-edge/test/framework/testcluster"
	"github.com/nexo-io/nexo-edge/test/framework/testinstall"
)

// TestManagerLeaderKill: two Managers run from the chart's Deployment (leader election on, the
// product's lease settings); kill -9 of the active one hands the Lease to the other within the
// lease duration, and it applies the next command. Until then the standby applies nothing.
func TestManagerLeaderKill(t *testing.T) {
	ctx := context.Background()
	cp := startControlPlane(t)
	p, env := hosted(t, cp, cp.url(), []string{"shop"}, 5, testcluster.Options{})
	must(t, p.admin.Create(ctx, licenseSecret("shop", p.licenseDoc)))
	p.startOperator(t)
	a := p.startManager(t)
	b := p.startStandbyManager(t)
	holder := func() string {
		l := &coordinationv1.Lease{}
		if err := p.admin.Get(ctx, clientKey(testinstall.Namespace, wire.ManagerLease), l); err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	if err := waitUntil(time.Minute, func() bool { return holder() != "" }); err != nil {
		t.Fatal("no Manager holds the Lease")
	}
	active, standby := a, b
	if strings.HasSuffix(holder(), "-"+strconv.Itoa(b.Pid())) {
		active, standby = b, a
	}
	if !strings.HasSuffix(holder(), "-"+strconv.Itoa(active.Pid())) {
		t.Fatalf("the Lease holder %q is neither Manager (pids %d, %d)", holder(), a.Pid(), b.Pid())
	}
	first := cp.deploy(t, env, "shop", "before-kill")
	applied := func(id string) bool {
		for _, c := range cp.view(t, env).Commands {
			if c.ID == id {
				return c.Status == protocol.Applied
			}
		}
		return false
	}
	if err := waitUntil(2*time.Minute, func() bool { return applied(first) }); err != nil {
		t.Fatal("the active Manager did not apply the first deploy")
	}
	if strings.Contains(standby.Logs(), "this Manager is active") {
		t.Fatal("the standby Manager became active while the other held the Lease")
	}

	was := holder()
	killed := time.Now()
	active.Kill()
	if err := waitUntil(time.Minute, func() bool { h := holder(); return h != "" && h != was }); err != nil {
		t.Fatal("the standby Manager never took the Lease")
	}
	takeover := time.Since(killed)
	if !strings.HasSuffix(holder(), "-"+strconv.Itoa(standby.Pid())) {
		t.Fatalf("the Lease went to %q, not the standby (pid %d)", holder(), standby.Pid())
	}
	second := cp.deploy(t, env, "shop", "after-kill")
	if err := waitUntil(2*time.Minute, func() bool { return applied(second) }); err != nil {
		t.Fatal("the new active Manager did not apply the next deploy")
	}
	figure(t, "Manager leader kill -9, the standby takes the Lease", fmt.Sprintf("%.1fs (lease %s, renew deadline %s, retry %s); it applies the next deploy; the standby applied nothing before",
		takeover.Seconds(), manager.DefaultLeaseTimings.Duration, manager.DefaultLeaseTimings.RenewDeadline, manager.DefaultLeaseTimings.RetryPeriod))
}

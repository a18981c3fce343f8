package controllers

import (
	"strconv"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/nexo-io/nexo-edge/controllers/slimcache"
)

// deploymentVersion is the version a Deployment child is remembered at: its generation (status
// updates do not move it) and its labels (whose edits do not move the generation either).
func deploymentVersion(o client.Object) string {
	s := slimcache.StateOf(o)
	return strconv.FormatInt(s.Generation, 10) + "/" + strconv.FormatUint(s.LabelsHash, 16)
}

func deploymentStateOf(o client.Object) (*slimcache.DeploymentState, bool) {
	s := slimcache.StateOf(o)
	return s, s != nil
}

type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]

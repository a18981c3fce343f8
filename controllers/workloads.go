package controllers

import (
	"strconv"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nexo-io/nexo-edge/controllers/slimcache"
)

// deploymentVersion is the version a Deployment child is remembered at: its generation (status
// updates do not move it) and its labels (whose edits do not move the generation either).
func deploymentVersion(o client.Object) string {
	s := slimcache.StateOf(o)
	return strconv.FormatInt(s.Generation, 10) + "/" + strconv.FormatUint(s.LabelsHash, 16)
}

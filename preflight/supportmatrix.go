package preflight

import (
	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/releases"
)

// SupportMatrix says, per operator version this nexoctl knows, which kinds that operator
// reconciles; kinds it does not list are schema-only for it. It holds every release under
// releases/ (embedded: each released CRD's nexo.io/support label) and this build, so preflight
// judges an operator of another version by that version's own matrix, not this build's.
var SupportMatrix = supportMatrix()

func supportMatrix() map[string]map[string]catalog.Support {
	m, err := releases.SupportMatrix(releases.FS())
	if err != nil {
		// The embedded folders are checked by the releases package's tests; a build with a
		// malformed one still judges this build's own version.
		m = map[string]map[string]catalog.Support{}
	}
	m[catalog.BuildVersion] = thisBuild()
	return m
}

func thisBuild() map[string]catalog.Support {
	m := map[string]catalog.Support{}
	for _, k := range catalog.Kinds {
		m[k.Kind] = k.Support
	}
	return m
}

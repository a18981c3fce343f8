package preflight

import "github.com/nexo-io/nexo-edge/catalog"

// SupportMatrix says, per operator version this nexoctl knows, which kinds that operator
// reconciles; kinds it does not list are schema-only for it. It is embedded in nexoctl so
// preflight can judge an operator of another version than its own.
var SupportMatrix = map[string]map[string]catalog.Support{
	catalog.BuildVersion: thisBuild(),
}

func thisBuild() map[string]catalog.Support {
	m := map[string]catalog.Support{}
	for _, k := range catalog.Kinds {
		m[k.Kind] = k.Support
	}
	return m
}

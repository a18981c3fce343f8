package operator

import (
	"net/http"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// newRESTMapper is controller-runtime's discovery-backed mapper with its answers remembered.
// The cache asks for the mapping of the object's kind on every read (is it namespaced?); the
// underlying mapper answers that by asking every known API group in turn, which made it the
// operator's largest allocation per reconcile. Only successful mappings are remembered, so a
// kind installed later is still discovered.
func newRESTMapper(cfg *rest.Config, httpClient *http.Client) (meta.RESTMapper, error) {
	m, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	return &rememberingMapper{RESTMapper: m, mappings: map[mappingKey]*meta.RESTMapping{}}, nil
}

type mappingKey struct {
	gk      schema.GroupKind
	version string
}

type rememberingMapper struct {
	meta.RESTMapper
	mu       sync.RWMutex
	mappings map[mappingKey]*meta.RESTMapping
}

// RESTMapping answers from memory for a kind with at most one version asked for.
func (m *rememberingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	if len(versions) > 1 {
		return m.RESTMapper.RESTMapping(gk, versions...)
	}
	key := mappingKey{gk: gk}
	if len(versions) == 1 {
		key.version = versions[0]
	}
	m.mu.RLock()
	got, ok := m.mappings[key]
	m.mu.RUnlock()
	if ok {
		return got, nil
	}
	got, err := m.RESTMapper.RESTMapping(gk, versions...)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.mappings[key] = got
	m.mu.Unlock()
	return got, nil
}

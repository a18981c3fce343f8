package protocol

// A preview's answer (docs/protocol.md, "Previews"): what a deploy of the same signed manifests
// would do in the cluster, per object and per proxy. The Manager computes it from a server-side
// dry-run apply of every manifest and the operator's own rendering of every proxy the manifests
// touch; nothing is written. A deploy's acknowledgement carries the same per-proxy part, computed
// the same way just before it applied, so what a preview predicted and what a deploy did compare
// field by field.

// Outcomes of an object in a preview.
const (
	ObjectCreated   = "created"
	ObjectChanged   = "changed"
	ObjectUnchanged = "unchanged"
	ObjectRefused   = "refused"
)

// Outcomes of a proxy in a preview.
const (
	// ProxyRolls: the proxy's pod template changes, so its pods are replaced.
	ProxyRolls = "rolls"
	// ProxyUpdates: the graph changes but not the pods (a Service or the config of a revision
	// already running).
	ProxyUpdates = "updates"
	// ProxyUnchanged: nothing the proxy runs changes.
	ProxyUnchanged = "unchanged"
	// ProxyRefused: the operator would refuse the new graph (Why says why) and the proxy would
	// keep running its last revision, Degraded.
	ProxyRefused = "refused"
)

// MaxPreviewBytes bounds a preview's answer: past it the Manager sends the counts and drops the
// field changes, then the objects, then the proxies, saying so (Truncated).
const MaxPreviewBytes = 256 << 10

// PreviewResult is what a preview found.
type PreviewResult struct {
	Objects []ObjectPreview `json:"objects,omitempty"`
	Proxies []ProxyPreview  `json:"proxies,omitempty"`
	Summary PreviewSummary  `json:"summary"`
	// Truncated says what was left out to keep the answer within MaxPreviewBytes.
	Truncated string `json:"truncated,omitempty"`
}

// ObjectPreview is what the deploy would do to one manifest's object.
type ObjectPreview struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Outcome   string `json:"outcome"`
	// Changes are the fields a changed object would get (JSON Patch operations against the
	// object in the cluster; the signature annotations, which every deploy renews, are left out).
	Changes []FieldChange `json:"changes,omitempty"`
	// Reason is why the API server, an admission policy or the Manager would refuse it.
	Reason string `json:"reason,omitempty"`
}

// FieldChange is one JSON Patch operation: op add, remove or replace at path.
type FieldChange struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// ProxyPreview is what the deploy would do to one NexoProxy: the graph revision it runs (its
// status) and the one the operator would render, and whether its pods roll.
type ProxyPreview struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Before is the graph revision the proxy's status reports now ("" for a new proxy).
	Before string `json:"before,omitempty"`
	// After is the graph revision the operator would render (render.Revision).
	After   string `json:"after,omitempty"`
	Outcome string `json:"outcome"`
	Why     string `json:"why,omitempty"`
}

// PreviewSummary counts the outcomes.
type PreviewSummary struct {
	Created   int `json:"created"`
	Changed   int `json:"changed"`
	Unchanged int `json:"unchanged"`
	Refused   int `json:"refused"`
	// Rolls counts the proxies whose pods would be replaced; ProxiesRefused those the operator
	// would refuse.
	Rolls          int `json:"rolls"`
	ProxiesRefused int `json:"proxiesRefused"`
}

// Changes reports whether the preview finds anything the deploy would change or refuse.
func (p *PreviewResult) Changes() bool {
	s := p.Summary
	return s.Created+s.Changed+s.Refused+s.Rolls+s.ProxiesRefused > 0 || p.proxyChanges()
}

func (p *PreviewResult) proxyChanges() bool {
	for _, x := range p.Proxies {
		if x.Outcome != ProxyUnchanged {
			return true
		}
	}
	return false
}

// A project's pipeline revisions (docs/controlplane.md, "Change management"): immutable,
// numbered sets of nexo.io manifests, created by an editor or above, listed, shown, and diffed
// per object and per field between any two.

package controlplane

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"gomodules.xyz/jsonpatch/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/contract/signature"
	"github.com/nexo-io/nexo-edge/controlplane/authz"
	"github.com/nexo-io/nexo-edge/controlplane/storage"
)

// NewRevision is the body of a revision's creation.
type NewRevision struct {
	Message   string            `json:"message"`
	Manifests []json.RawMessage `json:"manifests"`
}

// maxRevisionObjects bounds a revision; maxRevisionMessage its message.
const (
	maxRevisionObjects = 1000
	maxRevisionMessage = 500
)

// RevisionView is a revision as the API shows it; Manifests only when one is shown.
type RevisionView struct {
	storage.Revision
	Manifests []json.RawMessage `json:"manifests,omitempty"`
	// Objects names the revision's objects (kind namespace/name), in order.
	Objects []string `json:"objects,omitempty"`
}

// createRevision is POST /admin/tenants/{tenant}/projects/{project}/revisions
// {"message", "manifests"} → 201 the revision (number, digest).
func (s *Server) createRevision(w http.ResponseWriter, r *http.Request, c authz.Caller) error {
	var req NewRevision
	if err := decode(r, &req, manifestBody); err != nil {
		return err
	}
	if err := s.pathProject(r); err != nil {
		return err
	}
	rev, err := s.newRevision(r, c, req.Message, req.Manifests)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, RevisionView{Revision: rev})
	return nil
}

// newRevision checks manifests and stores them as the path's project's next revision.
func (s *Server) newRevision(r *http.Request, c authz.Caller, message string, manifests []json.RawMessage) (storage.Revision, error) {
	tenant, project := r.PathValue("tenant"), r.PathValue("project")
	switch {
	case !utf8.ValidString(message) || utf8.RuneCountInString(message) > maxRevisionMessage:
		return storage.Revision{}, fail(http.StatusBadRequest, "the revision's message must be UTF-8, at most %d characters", maxRevisionMessage)
	case len(manifests) == 0:
		return storage.Revision{}, fail(http.StatusBadRequest, "a revision needs manifests: the project's nexo.io objects")
	case len(manifests) > maxRevisionObjects:
		return storage.Revision{}, fail(http.StatusBadRequest, "a revision holds at most %d objects (got %d)", maxRevisionObjects, len(manifests))
	}
	namespaces, err := s.tenantNamespaces(r, tenant)
	if err != nil {
		return storage.Revision{}, err
	}
	objs := make([]*unstructured.Unstructured, 0, len(manifests))
	seen := map[string]int{}
	for i, raw := range manifests {
		u, err := revisionObject(i, raw)
		if err != nil {
			return storage.Revision{}, err
		}
		id := objectID(u)
		if j, dup := seen[id]; dup {
			return storage.Revision{}, fail(http.StatusBadRequest, "manifests %d and %d are both %s: a revision holds each object once", j, i, id)
		}
		seen[id] = i
		if !namespaces[u.GetNamespace()] {
			return storage.Revision{}, fail(http.StatusBadRequest, "manifest %d (%s) is in namespace %s, which is no namespace target of tenant %s's environments: a tenant admin adds it (namespace-targets), or the manifest names the wrong namespace",
				i, id, u.GetNamespace(), tenant)
		}
		objs = append(objs, u)
	}
	body, digest, err := canonical(objs)
	if err != nil {
		return storage.Revision{}, err
	}
	if message == "" {
		message = "recorded by " + c.Actor()
	}
	rev, err := s.cfg.Store.CreateRevision(r.Context(), tenant, project, storage.Revision{Author: c.Actor(), Message: message, Digest: digest, Manifests: body})
	if err != nil {
		return rev, err
	}
	auditOf(r).reason = fmt.Sprintf("revision %d (%d objects, %s)", rev.Number, len(objs), digest[:19])
	return rev, nil
}

// tenantNamespaces are the namespace targets of the tenant's environments.
func (s *Server) tenantNamespaces(r *http.Request, tenant string) (map[string]bool, error) {
	envs, err := s.cfg.Store.TenantEnvironments(r.Context(), tenant)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, e := range envs {
		for _, t := range e.Targets {
			out[t.Namespace] = true
		}
	}
	return out, nil
}

// revisionObject decodes manifest i of a revision: a nexo.io kind this Control Plane knows, as
// nexo.io/v1alpha1, with a name and a namespace, stripped of what the server and the signature
// set (a revision holds what its author wrote; each deploy signs it afresh).
func revisionObject(i int, raw json.RawMessage) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		return nil, fail(http.StatusBadRequest, "manifest %d is not a Kubernetes object (apiVersion, kind and metadata, spelled exactly): %s", i, truncate(err.Error(), 200))
	}
	if _, ok := catalog.Lookup(u.GetKind()); !ok || u.GetAPIVersion() != catalog.Group+"/"+catalog.Version {
		return nil, fail(http.StatusBadRequest, "manifest %d is %q %q: a revision holds nexo.io kinds only, as %s/%s (apiVersion and kind, spelled exactly)", i, truncate(u.GetAPIVersion(), 60), truncate(u.GetKind(), 60), catalog.Group, catalog.Version)
	}
	if errs := validation.IsDNS1123Subdomain(u.GetName()); len(errs) > 0 {
		return nil, fail(http.StatusBadRequest, "manifest %d (%s) has no valid metadata.name: %s", i, u.GetKind(), strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Label(u.GetNamespace()); len(errs) > 0 {
		return nil, fail(http.StatusBadRequest, "manifest %d (%s %s) needs metadata.namespace, a namespace target of one of the tenant's environments: %s", i, u.GetKind(), u.GetName(), strings.Join(errs, "; "))
	}
	for _, f := range []string{"managedFields", "resourceVersion", "uid", "creationTimestamp", "generation"} {
		unstructured.RemoveNestedField(u.Object, "metadata", f)
	}
	unstructured.RemoveNestedField(u.Object, "status")
	if ann := u.GetAnnotations(); signature.HasSignature(ann) {
		u.SetAnnotations(signature.WithoutSignature(ann))
	}
	return u, nil
}

func objectID(u *unstructured.Unstructured) string {
	return u.GetKind() + " " + u.GetNamespace() + "/" + u.GetName()
}

// canonical is the manifests' stored form (a JSON array, in kind, namespace, name order) and
// its sha256 digest.
func canonical(objs []*unstructured.Unstructured) (string, string, error) {
	sort.Slice(objs, func(i, j int) bool { return objectID(objs[i]) < objectID(objs[j]) })
	list := make([]map[string]any, len(objs))
	for i, u := range objs {
		list[i] = u.Object
	}
	b, err := json.Marshal(list)
	if err != nil {
		return "", "", err
	}
	sum := sha256.Sum256(b)
	return string(b), "sha256:" + hex.EncodeToString(sum[:]), nil
}

// revisionObjects decodes a stored revision's manifests.
func revisionObjects(rev storage.Revision) ([]*unstructured.Unstructured, error) {
	var list []map[string]any
	if err := json.Unmarshal([]byte(rev.Manifests), &list); err != nil {
		return nil, fmt.Errorf("stored revision %d: %w", rev.Number, err)
	}
	out := make([]*unstructured.Unstructured, len(list))
	for i, o := range list {
		out[i] = &unstructured.Unstructured{Object: o}
	}
	return out, nil
}

// pathRevision reads the path's {revision} of the path's project (400 not a number, 404 none).
func (s *Server) pathRevision(r *http.Request, value string) (storage.Revision, error) {
	n, err := strconv.ParseInt(value, 10, 64)
	if err != nil || n < 1 {
		return storage.Revision{}, fail(http.StatusBadRequest, "a revision is a number from 1 (got %q)", truncate(value, 20))
	}
	return s.projectRevision(r, n)
}

// projectRevision reads revision n of the path's project (404 when there is none).
func (s *Server) projectRevision(r *http.Request, n int64) (storage.Revision, error) {
	tenant, project := r.PathValue("tenant"), r.PathValue("project")
	rev, err := s.cfg.Store.RevisionByNumber(r.Context(), tenant, project, n)
	if errors.Is(err, storage.ErrNotFound) {
		return rev, fail(http.StatusNotFound, "project %s/%s has no revision %d", tenant, project, n)
	}
	return rev, err
}

// listRevisions is GET .../projects/{project}/revisions: newest first, without manifests.
func (s *Server) listRevisions(w http.ResponseWriter, r *http.Request, _ authz.Caller) error {
	if err := s.pathProject(r); err != nil {
		return err
	}
	revs, err := s.cfg.Store.Revisions(r.Context(), r.PathValue("tenant"), r.PathValue("project"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"revisions": revs})
	return nil
}

// showRevision is GET .../projects/{project}/revisions/{revision}: with its manifests.
func (s *Server) showRevision(w http.ResponseWriter, r *http.Request, _ authz.Caller) error {
	if err := s.pathProject(r); err != nil {
		return err
	}
	rev, err := s.pathRevision(r, r.PathValue("revision"))
	if err != nil {
		return err
	}
	objs, err := revisionObjects(rev)
	if err != nil {
		return err
	}
	view := RevisionView{Revision: rev}
	for _, u := range objs {
		raw, _ := u.MarshalJSON()
		view.Manifests = append(view.Manifests, raw)
		view.Objects = append(view.Objects, objectID(u))
	}
	writeJSON(w, http.StatusOK, view)
	return nil
}

// ObjectDiff is what going from one revision to another does to one object.
type ObjectDiff struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Change is added, removed or changed (unchanged objects are not listed).
	Change string `json:"change"`
	// Fields are the JSON Patch operations of a changed object.
	Fields []jsonpatch.Operation `json:"fields,omitempty"`
}

// RevisionDiff is the answer of a diff.
type RevisionDiff struct {
	From      int64        `json:"from"`
	To        int64        `json:"to"`
	Objects   []ObjectDiff `json:"objects"`
	Unchanged int          `json:"unchanged"`
}

// diffRevisions is GET .../projects/{project}/revisions/{revision}/diff?from=N: what going from
// revision N to {revision} changes, per object and per field.
func (s *Server) diffRevisions(w http.ResponseWriter, r *http.Request, _ authz.Caller) error {
	if err := s.pathProject(r); err != nil {
		return err
	}
	to, err := s.pathRevision(r, r.PathValue("revision"))
	if err != nil {
		return err
	}
	from, err := s.pathRevision(r, r.URL.Query().Get("from"))
	if err != nil {
		return err
	}
	d, err := diff(from, to)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

// diff compares two revisions object by object (kind, namespace, name) and field by field.
func diff(from, to storage.Revision) (RevisionDiff, error) {
	out := RevisionDiff{From: from.Number, To: to.Number, Objects: []ObjectDiff{}}
	a, err := revisionObjects(from)
	if err != nil {
		return out, err
	}
	b, err := revisionObjects(to)
	if err != nil {
		return out, err
	}
	before := map[string]*unstructured.Unstructured{}
	for _, u := range a {
		before[objectID(u)] = u
	}
	var ids []string
	after := map[string]*unstructured.Unstructured{}
	for _, u := range b {
		after[objectID(u)] = u
		ids = append(ids, objectID(u))
	}
	for id := range before {
		if _, ok := after[id]; !ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		old, hadOld := before[id]
		cur, hasNew := after[id]
		u := cur
		if !hasNew {
			u = old
		}
		d := ObjectDiff{Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName()}
		switch {
		case !hadOld:
			d.Change = "added"
		case !hasNew:
			d.Change = "removed"
		default:
			x, _ := json.Marshal(old.Object)
			y, _ := json.Marshal(cur.Object)
			ops, err := jsonpatch.CreatePatch(x, y)
			if err != nil {
				return out, err
			}
			if len(ops) == 0 {
				out.Unchanged++
				continue
			}
			sort.Slice(ops, func(i, j int) bool { return ops[i].Path < ops[j].Path })
			d.Change, d.Fields = "changed", ops
		}
		out.Objects = append(out.Objects, d)
	}
	return out, nil
}

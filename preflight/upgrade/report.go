package upgrade

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"

	"github.com/blang/semver/v4"
	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/contract/fingerprint"
	"github.com/nexo-io/nexo-edge/contract/wire"
	"github.com/nexo-io/nexo-edge/preflight/schemadiff"
)

// Report is everything `nexoctl preflight --upgrade` found.
type Report struct {
	// Installed is the operator version running in the install namespace ("" when none is).
	Installed string `json:"installedVersion"`
	Build     string `json:"buildVersion"`
	// Edge says whether this build upgrades the installed version in one step.
	Edge Edge `json:"edge"`
	// Schema compares the installed CRDs with this build's.
	Schema schemadiff.Report `json:"schema"`
	// StoredVersions lists stored versions this build's CRDs no longer have.
	StoredVersions []string `json:"storedVersions"`
	// ObjectsChecked counts the live Nexo objects checked against the new schemas.
	ObjectsChecked int            `json:"objectsChecked"`
	Objects        []Finding      `json:"objects"`
	Proxies        []ProxyOutcome `json:"proxies"`
	// DeployLimit is the Manager's deploy limit after the upgrade; an empty one is a warning,
	// not Breaking: running proxies keep serving, but nothing new is deployed.
	DeployLimit DeployLimit `json:"deployLimit"`
	// TrustedKeys says whether the trusted-keys Secret outlives the upgrade; a warning, like
	// DeployLimit (the new Manager makes it so itself).
	TrustedKeys TrustedKeys `json:"trustedKeys"`
	// Breaking is true when the upgrade should not go ahead as is.
	Breaking bool `json:"breaking"`
}

// Edge is the upgrade edge from the installed version.
type Edge struct {
	OK      bool   `json:"ok"`
	Message string `json:"message"`
}

// EdgeFrom decides whether build upgrades installed in one step: the same version (a re-install),
// or a version in upgradesFrom (the bundle's skipRange). A newer installed version is a
// downgrade, which is refused; anything older needs an intermediate release.
func EdgeFrom(installed, build, upgradesFrom string) Edge {
	if installed == "" {
		return Edge{OK: true, Message: "nothing is installed: this is a first install"}
	}
	iv, err := semver.Parse(installed)
	if err != nil {
		return Edge{Message: fmt.Sprintf("the installed operator says version %q, which is not a version: cannot tell whether %s upgrades it", installed, build)}
	}
	bv := semver.MustParse(build)
	switch {
	case iv.EQ(bv):
		return Edge{OK: true, Message: "the installed version is this build's: a re-install"}
	case iv.GT(bv):
		return Edge{Message: fmt.Sprintf("%s is installed, newer than this build %s: a downgrade is refused (the newer release may have written data the older schemas prune); use the nexoctl of %s", installed, build, installed)}
	}
	if upgradesFrom != "" {
		if in, err := semver.ParseRange(upgradesFrom); err == nil && in(iv) {
			return Edge{OK: true, Message: fmt.Sprintf("%s upgrades to %s in one step (%s)", installed, build, upgradesFrom)}
		}
	}
	return Edge{Message: fmt.Sprintf("no upgrade edge from %s to %s: this build upgrades %q; upgrade to a release in that range first", installed, build, upgradesFrom)}
}

// InstalledVersion reads the version label of the operator Deployment in ns ("" when there is
// none).
func InstalledVersion(ctx context.Context, c client.Client, ns string) (string, error) {
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: wire.OperatorName}, d); err != nil {
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		return "", err
	}
	return d.Labels["app.kubernetes.io/version"], nil
}

// Run builds the report: ns is the install namespace (the operator's, which holds the profiles'
// pull Secrets), build the CRDs this build installs.
func Run(ctx context.Context, c client.Client, ns string, build map[string]*apiextensionsv1.CustomResourceDefinition) (*Report, error) {
	r := &Report{Build: catalog.BuildVersion, StoredVersions: []string{}, Objects: []Finding{}, Proxies: []ProxyOutcome{}}
	var err error
	if r.Installed, err = InstalledVersion(ctx, c, ns); err != nil {
		return nil, fmt.Errorf("read the installed operator: %w", err)
	}
	r.Edge = EdgeFrom(r.Installed, catalog.BuildVersion, catalog.UpgradesFrom)
	list, err := fingerprint.NexoCRDs(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("read the installed CRDs: %w", err)
	}
	installed := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for i := range list {
		installed[list[i].Spec.Names.Kind] = &list[i]
	}
	r.Schema = schemadiff.Compare("cluster", installed, catalog.BuildVersion, build)
	for _, kind := range slices.Sorted(maps.Keys(installed)) {
		crd := installed[kind]
		next := build[kind]
		for _, sv := range crd.Status.StoredVersions {
			if next == nil || !hasVersion(next, sv) {
				r.StoredVersions = append(r.StoredVersions, fmt.Sprintf("%s: objects are stored as %s, which this build's CRD does not have; migrate them and remove %s from status.storedVersions first", kind, sv, sv))
			}
		}
		if err := r.checkObjects(ctx, c, crd, next); err != nil {
			return nil, err
		}
	}
	if r.Proxies, err = Predict(ctx, c, ns); err != nil {
		return nil, fmt.Errorf("predict the proxies' rollouts: %w", err)
	}
	if r.DeployLimit, err = ReadDeployLimit(ctx, c, ns); err != nil {
		return nil, fmt.Errorf("read the Manager's deploy limit: %w", err)
	}
	if r.TrustedKeys, err = CheckTrustedKeys(ctx, c, ns); err != nil {
		return nil, fmt.Errorf("read the trusted-keys Secret: %w", err)
	}
	r.Breaking = !r.Edge.OK || r.Schema.Count(schemadiff.Breaking) > 0 || len(r.StoredVersions) > 0 || r.Count(OutcomeRefused) > 0
	for _, f := range r.Objects {
		r.Breaking = r.Breaking || f.Breaking
	}
	return r, nil
}

func hasVersion(c *apiextensionsv1.CustomResourceDefinition, v string) bool {
	for _, x := range c.Spec.Versions {
		if x.Name == v {
			return true
		}
	}
	return false
}

// checkObjects checks every live object of an installed CRD against this build's schema of the
// same version.
func (r *Report) checkObjects(ctx context.Context, c client.Client, installed, next *apiextensionsv1.CustomResourceDefinition) error {
	kind := installed.Spec.Names.Kind
	for _, v := range installed.Spec.Versions {
		if !v.Served {
			continue
		}
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion(installed.Spec.Group + "/" + v.Name)
		list.SetKind(kind + "List")
		if err := c.List(ctx, list); err != nil {
			return fmt.Errorf("list %s: %w", kind, err)
		}
		if len(list.Items) == 0 {
			continue
		}
		var nv *apiextensionsv1.CustomResourceDefinitionVersion
		if next != nil {
			for i := range next.Spec.Versions {
				if next.Spec.Versions[i].Name == v.Name {
					nv = &next.Spec.Versions[i]
				}
			}
		}
		if nv == nil {
			for _, o := range list.Items {
				r.Objects = append(r.Objects, Finding{Kind: kind, Namespace: o.GetNamespace(), Name: o.GetName(), Rule: "version", Breaking: true,
					Message: kind + " " + v.Name + " is not served by this build", Action: "migrate or delete it before upgrading"})
			}
			continue
		}
		s, err := NewSchema(nv.Schema)
		if err != nil {
			return fmt.Errorf("this build's %s %s schema: %w", kind, v.Name, err)
		}
		for i := range list.Items {
			r.ObjectsChecked++
			r.Objects = append(r.Objects, s.Check(ctx, &list.Items[i])...)
		}
		break // the served versions hold the same objects; one is enough
	}
	return nil
}

// Count is the number of proxies with an outcome.
func (r *Report) Count(outcome string) int {
	n := 0
	for _, p := range r.Proxies {
		if p.Outcome == outcome {
			n++
		}
	}
	return n
}

// WriteText writes the report for a person deciding whether to upgrade.
func (r *Report) WriteText(w io.Writer) {
	mark := func(ok bool) string {
		if ok {
			return "✓"
		}
		return "✗"
	}
	installed := r.Installed
	if installed == "" {
		installed = "nothing"
	}
	fmt.Fprintf(w, "Upgrade from %s to %s\n\n", installed, r.Build)
	fmt.Fprintf(w, "%s upgrade edge: %s\n", mark(r.Edge.OK), r.Edge.Message)
	fmt.Fprintf(w, "%s schemas: %s\n", mark(r.Schema.Count(schemadiff.Breaking) == 0), r.Schema.Summary())
	for _, c := range r.Schema.Changes {
		if c.Severity != schemadiff.Safe {
			fmt.Fprintf(w, "    %s %s %s [%s] %s; %s\n", c.Severity, c.Kind, c.Path, c.Rule, c.Change, c.Migration)
		}
	}
	fmt.Fprintf(w, "%s stored versions: ", mark(len(r.StoredVersions) == 0))
	if len(r.StoredVersions) == 0 {
		fmt.Fprintln(w, "every one is still served")
	} else {
		fmt.Fprintln(w)
		for _, s := range r.StoredVersions {
			fmt.Fprintln(w, "    "+s)
		}
	}
	breaking := 0
	for _, f := range r.Objects {
		if f.Breaking {
			breaking++
		}
	}
	fmt.Fprintf(w, "%s live objects: %d checked against the new schemas (validation, CEL, defaults, pruning), %d would break, %d would change\n",
		mark(breaking == 0), r.ObjectsChecked, breaking, len(r.Objects)-breaking)
	findings := append([]Finding(nil), r.Objects...)
	sort.SliceStable(findings, func(i, j int) bool { return findings[i].Breaking && !findings[j].Breaking })
	for _, f := range findings {
		sev := "changes"
		if f.Breaking {
			sev = "breaks"
		}
		fmt.Fprintf(w, "    %s %s %s/%s %s [%s] %s; %s\n", sev, f.Kind, f.Namespace, f.Name, f.Path, f.Rule, f.Message, f.Action)
	}
	fmt.Fprintf(w, "%s proxies: %d roll, %d Deployments updated without a roll, %d unchanged, %d refused, %d not predicted\n",
		mark(r.Count(OutcomeRefused) == 0), r.Count(OutcomeRolls), r.Count(OutcomeUpdates), r.Count(OutcomeUnchanged), r.Count(OutcomeRefused), r.Count(OutcomeSkipped))
	for _, p := range r.Proxies {
		if p.Outcome != OutcomeUnchanged {
			fmt.Fprintf(w, "    %s %s/%s %s\n", p.Outcome, p.Namespace, p.Name, p.Why)
		}
	}
	limitMark := mark(r.DeployLimit.OK)
	if !r.DeployLimit.OK {
		limitMark = "!"
	}
	fmt.Fprintf(w, "%s deploy limit: %s\n", limitMark, r.DeployLimit.Message)
	keysMark := mark(true)
	if !r.TrustedKeys.OK {
		keysMark = "!"
	}
	fmt.Fprintf(w, "%s trusted keys: %s\n", keysMark, r.TrustedKeys.Message)
	if r.Breaking {
		fmt.Fprintln(w, "\nThe upgrade would break something above: do what each line says, then run this again.")
	} else {
		fmt.Fprintln(w, "\nNothing breaks: the upgrade may go ahead.")
	}
}

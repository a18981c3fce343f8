// Command changelog writes the schema section of every version in CHANGELOG.md from the CRDs
// (docs/release.md, "Release notes"): between the lines
//
//	<!-- schema-diff VERSION -->
//	<!-- end schema-diff -->
//
// it puts `nexoctl schema diff` of the release before VERSION against VERSION, as markdown.
// VERSION's CRDs are releases/VERSION/crds when it is released, else config/crd/bases (this
// build); the first release compares with nothing. make changelog runs it; make
// verify-generated fails when CHANGELOG.md is stale.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"github.com/blang/semver/v4"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/hack/releasebuild"
	"github.com/nexo-io/nexo-edge/preflight/schemadiff"
)

const changelog = "CHANGELOG.md"

var block = regexp.MustCompile(`(?s)(<!-- schema-diff ([0-9][^ ]*) -->\n).*?(<!-- end schema-diff -->)`)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "changelog:", err)
		os.Exit(1)
	}
}

func run() error {
	raw, err := os.ReadFile(changelog)
	if err != nil {
		return err
	}
	released, err := releasebuild.Versions(".")
	if err != nil {
		return err
	}
	if !block.Match(raw) {
		return fmt.Errorf("%s has no <!-- schema-diff VERSION --> block", changelog)
	}
	var failed error
	out := block.ReplaceAllFunc(raw, func(m []byte) []byte {
		sub := block.FindSubmatch(m)
		md, err := section(string(sub[2]), released)
		if err != nil {
			failed = err
			return m
		}
		return append(append(append([]byte{}, sub[1]...), md...), sub[3]...)
	})
	if failed != nil {
		return failed
	}
	return os.WriteFile(changelog, out, 0o644)
}

// section is the markdown schema section of version.
func section(version string, released []semver.Version) (string, error) {
	v, err := semver.Parse(version)
	if err != nil {
		return "", err
	}
	newDir := ""
	for _, r := range released {
		if r.EQ(v) {
			newDir = filepath.Join("releases", version, "crds")
		}
	}
	if newDir == "" {
		if version != catalog.BuildVersion {
			return "", fmt.Errorf("%s: %s is neither released nor this build's version %s", changelog, version, catalog.BuildVersion)
		}
		newDir = "config/crd/bases"
	}
	next, err := schemadiff.LoadDir(newDir)
	if err != nil {
		return "", err
	}
	oldName, old := "nothing (the first release)", map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, r := range released {
		if r.LT(v) {
			oldName = r.String()
			if old, err = schemadiff.LoadDir(filepath.Join("releases", r.String(), "crds")); err != nil {
				return "", err
			}
		}
	}
	return schemadiff.Compare(oldName, old, version, next).Markdown(), nil
}

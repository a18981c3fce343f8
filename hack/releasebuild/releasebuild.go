// Package releasebuild reads releases/ (the one reader of which versions were released and what
// each release.json records, for the generators, the benchmark and the upgrade tests) and builds
// a released version's binaries from the source commit its release.json names, so upgrade tests
// and the benchmark run exactly what was released (docs/upgrade.md, "Tested").
package releasebuild

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"github.com/blang/semver/v4"

	"github.com/nexo-io/nexo-edge/contract/buildinfo"
)

// Record is the part of releases/<version>/release.json read here.
type Record struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
	Created string `json:"created"`
	Bundle  struct {
		Reference string `json:"reference"`
	} `json:"bundle"`
}

// Versions are the released versions (the folders of releases/ with a release.json), oldest
// first.
func Versions(root string) ([]semver.Version, error) {
	files, err := filepath.Glob(filepath.Join(root, "releases", "*", "release.json"))
	if err != nil {
		return nil, err
	}
	var out []semver.Version
	for _, f := range files {
		v, err := semver.Parse(filepath.Base(filepath.Dir(f)))
		if err != nil {
			return nil, fmt.Errorf("%s: the folder is not a version: %w", f, err)
		}
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].LT(out[j]) })
	return out, nil
}

// Previous is the newest released version older than version ("" when there is none).
func Previous(root, version string) (string, error) {
	v, err := semver.Parse(version)
	if err != nil {
		return "", err
	}
	all, err := Versions(root)
	if err != nil {
		return "", err
	}
	prev := ""
	for _, r := range all {
		if r.LT(v) {
			prev = r.String()
		}
	}
	return prev, nil
}

// Read reads releases/<version>/release.json under the repository root.
func Read(root, version string) (Record, error) {
	raw, err := os.ReadFile(filepath.Join(root, "releases", version, "release.json"))
	if err != nil {
		return Record{}, err
	}
	var r Record
	if err := json.Unmarshal(raw, &r); err != nil {
		return Record{}, err
	}
	if r.Version != version || len(r.Commit) < 12 {
		return Record{}, fmt.Errorf("releases/%s/release.json names version %q, commit %q", version, r.Version, r.Commit)
	}
	return r, nil
}

// Build builds each cmd/<name> of names of a released version, stamped with the release's
// version and commit, and returns the binaries by name. A release's binaries never change, so
// they are kept per machine (CacheDir) and built once: from the release's source commit (git
// archive) extracted into dir.
func Build(root, version, dir string, names ...string) (map[string]string, error) {
	rec, err := Read(root, version)
	if err != nil {
		return nil, err
	}
	cache := filepath.Join(CacheDir(), fmt.Sprintf("%s-%s-%s-%s_%s", version, rec.Commit[:12], runtime.Version(), runtime.GOOS, runtime.GOARCH))
	out := map[string]string{}
	var missing []string
	for _, name := range names {
		bin := filepath.Join(cache, name)
		if _, err := os.Stat(bin); err == nil {
			out[name] = bin
		} else {
			missing = append(missing, name)
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	built, err := buildFromSource(root, rec, dir, missing...)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return nil, err
	}
	for name, bin := range built {
		dst := filepath.Join(cache, name)
		// Copied, then renamed into place: a concurrent test never runs a half-written file.
		tmp, err := os.CreateTemp(cache, name+".tmp-")
		if err != nil {
			return nil, err
		}
		src, err := os.Open(bin)
		if err != nil {
			return nil, err
		}
		_, err = io.Copy(tmp, src)
		src.Close()
		if err == nil {
			err = tmp.Chmod(0o755)
		}
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp.Name(), dst)
		}
		if err != nil {
			_ = os.Remove(tmp.Name())
			return nil, err
		}
		out[name] = dst
	}
	return out, nil
}

// CacheDir is where released binaries are kept on this machine: $NEXO_RELEASE_CACHE, else
// nexo-edge/releases in the user's cache folder.
func CacheDir() string {
	if d := os.Getenv("NEXO_RELEASE_CACHE"); d != "" {
		return d
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	return filepath.Join(base, "nexo-edge", "releases")
}

// buildFromSource extracts the release's source commit into dir and builds each cmd/<name> into
// dir/<name>-<version>.
func buildFromSource(root string, rec Record, dir string, names ...string) (map[string]string, error) {
	version := rec.Version
	src := filepath.Join(dir, "src-"+version)
	if err := os.MkdirAll(src, 0o755); err != nil {
		return nil, err
	}
	archive := exec.Command("sh", "-c", fmt.Sprintf("git -C %q archive --format=tar %s | tar -x -C %q", root, rec.Commit, src))
	if out, err := archive.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("releases/%s was built from commit %s, which this clone cannot read (a shallow clone? git fetch --unshallow): %v\n%s", version, rec.Commit, err, out)
	}
	stamp := strings.NewReplacer("-", "", "T", ".", ":", "").Replace(rec.Created)
	if len(stamp) >= 13 {
		stamp = stamp[:13] // 20261204.2149, as the release stamped it
	}
	out := map[string]string{}
	for _, name := range names {
		bin := filepath.Join(dir, name+"-"+version)
		// -trimpath, as the Makefile builds: the release's dependencies are this commit's at the
		// same versions mostly, and the build cache then holds them once.
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", buildinfo.LinkFlags(stamp, rec.Commit[:12]), "-o", bin, "./cmd/"+name)
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false")
		if b, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("build %s of %s: %v\n%s", name, version, err, b)
		}
		out[name] = bin
	}
	return out, nil
}

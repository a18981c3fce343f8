// Command release builds the product's images and publishes a release (docs/release.md):
//
//	go run ./hack/release images [-out dist/oci]
//
//	go run ./hack/release publish-images -version 0.2.0 -registry registry.example.com/nexo
//
//	go run ./hack/release release -version 0.2.0 -registry ghcr.io/nexo-io [-push-to 127.0.0.1:5000]
//
//	go run ./hack/release catalog [-registry ghcr.io/nexo-io] [-push-to 127.0.0.1:5000]
//
//	go run ./hack/release registry -addr 127.0.0.1:5000
//
//	go run ./hack/release compile
//
// images builds the operator, Manager and reference Control Plane for linux/amd64 and
// linux/arm64 with go-containerregistry (no container runtime) into one OCI image layout. Two
// builds of the same commit give the same digests: every timestamp is the commit's, the tar
// entries and JSON are written in a fixed order, and the binaries are built with -trimpath and
// no build id.
//
// publish-images builds them from a clean work tree, pushes each to REGISTRY/<image>:<version>,
// attaches a CycloneDX SBOM of each binary (from its Go build information) to its image as an
// OCI referrer, and only then writes dist/release.json with every digest.
//
// release does what publish-images does, then pushes the nexoctl archives, the chart and the
// bundle image, keeps the release under releases/<version>/ with every artefact by digest
// (release.go), and publishes the catalog image (catalogimage.go). catalog publishes the catalog
// image of the newest release alone (again, for one cut elsewhere). -push-to sends the pushes
// to a loopback registry standing in for REGISTRY; registry serves one (in memory).
//
// compile cross-compiles every binary a release ships, for every platform it ships on, with the
// release's flags, and throws the binaries away: it fills the Go build cache, so that a later
// release, or make test-release, only links. CI runs it in the background (hack/prebuild.sh).
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: release images [-out DIR] | publish-images -version V -registry HOST/PATH [-out FILE] | release -version V -registry HOST/PATH [-push-to ADDR] | catalog [-registry HOST/PATH] [-push-to ADDR] | registry -addr ADDR | compile")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "images":
		err = imagesCmd(os.Args[2:])
	case "publish-images":
		err = publishCmd(os.Args[2:])
	case "release":
		err = releaseCmd(os.Args[2:])
	case "catalog":
		err = catalogCmd(os.Args[2:])
	case "registry":
		err = registryCmd(os.Args[2:])
	case "compile":
		err = compileCmd()
	default:
		err = fmt.Errorf("unknown command %q (want images, publish-images, release, catalog, registry or compile)", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func imagesCmd(args []string) error {
	fs := flag.NewFlagSet("images", flag.ExitOnError)
	out := fs.String("out", "dist/oci", "the OCI image layout to write")
	_ = fs.Parse(args)
	start := time.Now()
	work, err := os.MkdirTemp("", "nexo-images-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	images, s, err := buildAll(".", work, false)
	if err != nil {
		return err
	}
	if err := writeLayout(*out, images, s.Version); err != nil {
		return err
	}
	for _, b := range images {
		d, err := b.Index.Digest()
		if err != nil {
			return err
		}
		fmt.Printf("%-20s %s@%s\n", b.Image, s.Version, d)
	}
	fmt.Printf("wrote %s (commit %s) in %s\n", *out, s.Commit, time.Since(start).Round(time.Second))
	return nil
}

// buildAll builds every image from the repository at repo, keeping the binaries in work;
// clean refuses a dirty work tree.
func buildAll(repo, work string, clean bool) ([]*built, source, error) {
	s, err := sourceOf(repo, clean)
	if err != nil {
		return nil, s, err
	}
	abs, err := filepath.Abs(repo)
	if err != nil {
		return nil, s, err
	}
	var out []*built
	for _, b := range binaries {
		img, err := buildImage(abs, work, b, s)
		if err != nil {
			return nil, s, err
		}
		out = append(out, img)
	}
	return out, s, nil
}

// workspace is the repository (the current folder) and a temporary folder for the binaries a
// command builds, removed by done.
func workspace() (repo, work string, done func(), err error) {
	if repo, err = filepath.Abs("."); err != nil {
		return "", "", nil, err
	}
	if work, err = os.MkdirTemp("", "nexo-release-"); err != nil {
		return "", "", nil, err
	}
	return repo, work, func() { os.RemoveAll(work) }, nil
}

func publishCmd(args []string) error {
	fs := flag.NewFlagSet("publish-images", flag.ExitOnError)
	version := fs.String("version", "", "the release version (must be catalog.BuildVersion)")
	registry := fs.String("registry", "", "where to push: host[:port]/path")
	out := fs.String("out", "dist/release.json", "the record of what was published")
	_ = fs.Parse(args)
	repo, work, done, err := workspace()
	if err != nil {
		return err
	}
	defer done()
	pub, err := publishImages(repo, work, *registry, *version, nil, remote.WithAuthFromKeychain(authn.DefaultKeychain))
	if err != nil {
		return err
	}
	if err := writePublication(*out, pub); err != nil {
		return err
	}
	for _, im := range pub.Images {
		fmt.Println(im.Reference)
	}
	fmt.Println("wrote", *out)
	return nil
}

func releaseCmd(args []string) error {
	fs := flag.NewFlagSet("release", flag.ExitOnError)
	version := fs.String("version", "", "the release version (must be catalog.BuildVersion)")
	registry := fs.String("registry", "", "where the images live: host[:port]/path (the references written name it)")
	to := fs.String("push-to", "", "push to this loopback registry instead of REGISTRY's host (a rehearsal or stand-in)")
	_ = fs.Parse(args)
	opts, err := pushTo(*registry, *to)
	if err != nil {
		return err
	}
	if *to == "" {
		opts = append(opts, remote.WithAuthFromKeychain(authn.DefaultKeychain))
	}
	repo, work, done, err := workspace()
	if err != nil {
		return err
	}
	defer done()
	pub, err := releaseVersion(repo, work, *registry, *version, *to, opts...)
	if err != nil {
		return err
	}
	for _, im := range append(pub.Images, *pub.Bundle) {
		fmt.Println(im.Reference)
	}
	fmt.Printf("released %s into %s/%s; the catalog is regenerated: review and commit both\n", pub.Version, releasesDir, pub.Version)
	return nil
}

func catalogCmd(args []string) error {
	fs := flag.NewFlagSet("catalog", flag.ExitOnError)
	registry := fs.String("registry", "", "where the catalog image lives: host[:port]/path (default: the newest release's registry)")
	to := fs.String("push-to", "", "push to this loopback registry instead of REGISTRY's host (a rehearsal or stand-in)")
	_ = fs.Parse(args)
	repo, err := filepath.Abs(".")
	if err != nil {
		return err
	}
	if *registry == "" {
		r, err := newestRelease(repo)
		if err != nil {
			return err
		}
		*registry = r.Registry
	}
	opts, err := pushTo(*registry, *to)
	if err != nil {
		return err
	}
	if *to == "" {
		opts = append(opts, remote.WithAuthFromKeychain(authn.DefaultKeychain))
	}
	pub, err := publishCatalog(repo, *registry, opts...)
	if err != nil {
		return err
	}
	fmt.Println(pub.Reference)
	fmt.Println("recorded in releases/*/" + catalogRecord + "; run make bundle so olm/subscribe.yaml names it")
	return nil
}

// compileCmd builds each image binary for every image platform and nexoctl for every CLI
// platform into a scratch folder, and removes it.
func compileCmd() error {
	repo, work, done, err := workspace()
	if err != nil {
		return err
	}
	defer done()
	s, err := sourceOf(repo, false)
	if err != nil {
		return err
	}
	start := time.Now()
	build := func(name string, p v1.Platform) error {
		t := time.Now()
		if err := compileBinary(repo, name, p, s, filepath.Join(work, name+"-"+p.OS+"-"+p.Architecture)); err != nil {
			return err
		}
		fmt.Printf("compiled %s for %s/%s in %s\n", name, p.OS, p.Architecture, time.Since(t).Round(time.Second))
		return nil
	}
	for _, p := range platforms {
		for _, b := range binaries {
			if err := build(b.Name, p); err != nil {
				return err
			}
		}
	}
	for _, p := range cliPlatforms {
		if err := build("nexoctl", p); err != nil {
			return err
		}
	}
	fmt.Printf("compiled every release binary in %s\n", time.Since(start).Round(time.Second))
	return nil
}

func registryCmd(args []string) error {
	fs := flag.NewFlagSet("registry", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:5000", "loopback address to serve on")
	_ = fs.Parse(args)
	fmt.Println("serving an in-memory OCI registry on", *addr)
	return http.ListenAndServe(*addr, registry.New(registry.WithReferrersSupport(true), registry.Logger(log.New(io.Discard, "", 0))))
}

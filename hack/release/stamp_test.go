package main

import (
	"os"
	"strings"
	"testing"
)

var testDigests = digests{
	"nexo-operator": "r.example/nexo/nexo-operator@sha256:" + strings.Repeat("a", 64),
	"nexo-manager":  "r.example/nexo/nexo-manager@sha256:" + strings.Repeat("b", 64),
	"nexo-proxy":    "r.example/nexo/nexo-proxy@sha256:" + strings.Repeat("c", 64),
}

// Stamping values.yaml changes the image repositories and digests and nothing else: every
// comment and every other line stays.
func TestStampValuesKeepsTheRest(t *testing.T) {
	raw, err := os.ReadFile("../../charts/nexo-edge/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out, err := stampValues(raw, testDigests)
	if err != nil {
		t.Fatal(err)
	}
	before, after := strings.Split(string(raw), "\n"), strings.Split(string(out), "\n")
	if len(before) != len(after) {
		t.Fatalf("%d lines became %d:\n%s", len(before), len(after), out)
	}
	var changed []string
	for i := range before {
		if before[i] != after[i] {
			changed = append(changed, strings.TrimSpace(after[i]))
		}
	}
	want := []string{
		"repository: r.example/nexo/nexo-operator", `digest: "sha256:` + strings.Repeat("a", 64) + `"`,
		"repository: r.example/nexo/nexo-manager", `digest: "sha256:` + strings.Repeat("b", 64) + `"`,
	}
	if strings.Join(changed, "\n") != strings.Join(want, "\n") {
		t.Errorf("changed lines:\n%s\nwant:\n%s", strings.Join(changed, "\n"), strings.Join(want, "\n"))
	}
}

// A CSV that names an image the release did not publish is refused, naming the image.
func TestStampCSVRefusesAnUnreleasedImage(t *testing.T) {
	raw, err := os.ReadFile("../../bundle/manifests/nexo-operator.clusterserviceversion.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out, err := stampCSV(raw, testDigests, "2026-12-05T10:00:00Z")
	if err != nil {
		t.Fatalf("the generated CSV: %v", err)
	}
	if !strings.Contains(string(out), "createdAt: \"2026-12-05T10:00:00Z\"") {
		t.Error("the stamped CSV's createdAt is not the release's time")
	}
	// The proxy image, in relatedImages and the Manager's NEXO_PROXY_IMAGE, by digest.
	if n := strings.Count(string(out), testDigests["nexo-proxy"]); n != 2 || strings.Contains(string(out), "nexo-proxy:") {
		t.Errorf("the stamped CSV names the proxy image by digest %d times, want 2 (relatedImages and NEXO_PROXY_IMAGE), and never by tag", n)
	}
	only := digests{"nexo-operator": testDigests["nexo-operator"], "nexo-proxy": testDigests["nexo-proxy"]}
	if _, err := stampCSV(raw, only, "2026-12-05T10:00:00Z"); err == nil || !strings.Contains(err.Error(), "nexo-manager") {
		t.Errorf("stamp without the Manager's digest: %v", err)
	}
	noProxy := digests{"nexo-operator": testDigests["nexo-operator"], "nexo-manager": testDigests["nexo-manager"]}
	if _, err := stampCSV(raw, noProxy, "2026-12-05T10:00:00Z"); err == nil || !strings.Contains(err.Error(), "nexo-proxy") {
		t.Errorf("stamp without the proxy image's digest: %v", err)
	}
}

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/nexo-io/nexo-edge/nexoctl/statuscmd"
	"github.com/nexo-io/nexo-edge/preflight"
	"github.com/nexo-io/nexo-edge/test/framework/testcluster"
)

// demoGraph is the orders graph from config/samples, trimmed to a router, tenant isolation, PII
// masking, a connection pool and metrics, for namespace shop.
func demoGraph() ([]json.RawMessage, error) {
	samples, err := testcluster.Samples()
	if err != nil {
		return nil, err
	}
	samples["NexoPipeline"].Object["spec"] = map[string]any{
		"router":     map[string]any{"kind": "NexoRouter", "name": "by-database"},
		"request":    []any{map[string]any{"kind": "NexoTenantIsolation", "name": "tenant-by-user"}},
		"response":   []any{map[string]any{"kind": "NexoPIIMasking", "name": "mask-pii"}},
		"connection": []any{map[string]any{"kind": "NexoConnectionPool", "name": "pool"}},
	}
	samples["NexoProxy"].Object["spec"].(map[string]any)["observabilityRefs"] = []any{map[string]any{"kind": "NexoMetrics", "name": "prometheus"}}
	var out []json.RawMessage
	for _, kind := range []string{"NexoDeploymentProfile", "NexoLicense", "NexoRouter", "NexoTenantIsolation", "NexoPIIMasking", "NexoConnectionPool", "NexoMetrics", "NexoPipeline", "NexoProxy"} {
		u := samples[kind]
		u.SetNamespace("shop")
		raw, err := u.MarshalJSON()
		if err != nil {
			return nil, err
		}
		out = append(out, raw)
	}
	return out, nil
}

// legacyGraph is applied directly (not through the Control Plane): a pipeline that references
// the schema-only NexoQueryGuard, and a proxy using it.
var legacyGraph = []string{
	`{"apiVersion":"nexo.io/v1alpha1","kind":"NexoQueryGuard","metadata":{"name":"no-where","namespace":"shop"},"spec":{"maxFilterDepth":8,"denyOperators":["$where"]}}`,
	`{"apiVersion":"nexo.io/v1alpha1","kind":"NexoPipeline","metadata":{"name":"guarded","namespace":"shop"},"spec":{"request":[{"kind":"NexoQueryGuard","name":"no-where"}]}}`,
	`{"apiVersion":"nexo.io/v1alpha1","kind":"NexoProxy","metadata":{"name":"legacy-proxy","namespace":"shop"},"spec":{"pipelineRef":{"name":"guarded"},"upstream":{"name":"primary","address":"legacy-mongo.db.svc:27017"},"profileRef":{"name":"standard"},"licenseRef":{"name":"acme"},"replicas":1}}`,
}

// check asserts what the demo must show, from nexoctl's JSON output (CI runs it).
func check(dir, bin string) error {
	nexoctl := func(args ...string) ([]byte, error) {
		cmd := exec.Command(filepath.Join(bin, "nexoctl"), append([]string{"--kubeconfig", filepath.Join(dir, "kubeconfig")}, args...)...)
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		var ee *exec.ExitError
		if err != nil && !(asExit(err, &ee) && ee.ExitCode() == 1) { // 1 = something not Ready / a check failed: expected here
			return nil, err
		}
		return out, nil
	}
	raw, err := nexoctl("status", "-A", "-o", "json")
	if err != nil {
		return fmt.Errorf("nexoctl status: %w", err)
	}
	var st statuscmd.Status
	if err := json.Unmarshal(raw, &st); err != nil {
		return fmt.Errorf("nexoctl status -o json: %w", err)
	}
	var problems []string
	found := map[string]statuscmd.Proxy{}
	for _, p := range st.Proxies {
		found[p.Name] = p
	}
	if p := found["orders-proxy"]; !p.Ready || p.Phase != "Ready" {
		problems = append(problems, fmt.Sprintf("orders-proxy is %q, want Ready", p.Phase))
	}
	if p := found["legacy-proxy"]; !strings.Contains(p.Message, "UnsupportedReference") || !strings.Contains(p.Message, "NexoQueryGuard") {
		problems = append(problems, fmt.Sprintf("legacy-proxy message %q, want UnsupportedReference naming NexoQueryGuard", p.Message))
	}
	if st.Manager.LastHeartbeat == nil {
		problems = append(problems, "no Manager heartbeat in nexoctl status")
	}
	raw, err = nexoctl("preflight", "-o", "json")
	if err != nil {
		return fmt.Errorf("nexoctl preflight: %w", err)
	}
	var r preflight.Report
	if err := json.Unmarshal(raw, &r); err != nil {
		return fmt.Errorf("nexoctl preflight -o json: %w", err)
	}
	if res, _ := r.ByID("schema-only-objects"); res.Status != preflight.Warning {
		problems = append(problems, fmt.Sprintf("support-matrix warning missing: %+v", res))
	}
	if res, _ := r.ByID("pipeline-references"); res.Status != preflight.Error || !strings.Contains(strings.Join(res.Details, " "), "shop/guarded request[0]: NexoQueryGuard") {
		problems = append(problems, fmt.Sprintf("pipeline reference check: %+v", res))
	}
	if res, _ := r.ByID("crds-fingerprint"); res.Status != preflight.OK {
		problems = append(problems, fmt.Sprintf("fingerprint: %+v", res))
	}
	if len(problems) > 0 {
		return fmt.Errorf("demo check failed:\n  %s", strings.Join(problems, "\n  "))
	}
	fmt.Println("demo check: orders-proxy Ready, legacy-proxy UnsupportedReference, Manager heartbeat reported, support-matrix warning shown")
	return nil
}

func asExit(err error, target **exec.ExitError) bool {
	e, ok := err.(*exec.ExitError)
	if ok {
		*target = e
	}
	return ok
}

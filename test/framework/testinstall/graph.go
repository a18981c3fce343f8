package testinstall

import (
	"fmt"
	"strings"
)

// HostedGraph is what the Control Plane deploys in the end-to-end suites: a profile
// ("standard", approving the images given for spec.proxyImage; without any, the graph is one a
// 0.2.0 cluster takes, which has no spec.approvedImages), a router, the customer's license ("acme", from the Secret acme-license, key
// license, licensed to Acme Corp), a pipeline and the proxy orders-proxy with replicas, in ns.
func HostedGraph(ns string, replicas int, approved ...string) string {
	approvedLine := "approvedImages: [" + strings.Join(approved, ", ") + "]"
	if len(approved) == 0 {
		approvedLine = ""
	}
	return strings.NewReplacer("NAMESPACE", ns, "REPLICAS", fmt.Sprint(replicas), "APPROVED", approvedLine).Replace(`apiVersion: nexo.io/v1alpha1
kind: NexoDeploymentProfile
metadata: {name: standard, namespace: NAMESPACE}
spec:
  images: {ingress: registry.example.com/nexo/ingress:0.2.0, egress: registry.example.com/nexo/egress:0.2.0}
  APPROVED
  defaults: {replicas: 1}
---
apiVersion: nexo.io/v1alpha1
kind: NexoRouter
metadata: {name: by-database, namespace: NAMESPACE}
spec:
  targets: [{name: primary, address: "mongo-0.mongo.db.svc:27017"}]
  defaultTarget: primary
---
apiVersion: nexo.io/v1alpha1
kind: NexoLicense
metadata: {name: acme, namespace: NAMESPACE}
spec:
  secretRef: {name: acme-license, key: license}
  expectedLicensee: Acme Corp
---
apiVersion: nexo.io/v1alpha1
kind: NexoPipeline
metadata: {name: orders, namespace: NAMESPACE}
spec:
  router: {kind: NexoRouter, name: by-database}
---
apiVersion: nexo.io/v1alpha1
kind: NexoProxy
metadata: {name: orders-proxy, namespace: NAMESPACE}
spec:
  pipelineRef: {name: orders}
  upstream: {name: primary, address: "mongo-0.mongo.db.svc:27017"}
  profileRef: {name: standard}
  licenseRef: {name: acme}
  replicas: REPLICAS
`)
}

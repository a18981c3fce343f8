package v1alpha1

import "sigs.k8s.io/controller-runtime/pkg/client"

// Object is implemented by every Nexo kind: a client.Object whose common status (observed
// generation and conditions) one status writer can update.
// +kubebuilder:object:generate=false
type Object interface {
	client.Object
	NexoStatus() *Status
}

// NexoStatus returns the common status of the NexoProxy.
func (o *NexoProxy) NexoStatus() *Status { return &o.Status.Status }

// NexoStatus returns the common status of the NexoPipeline.
func (o *NexoPipeline) NexoStatus() *Status { return &o.Status }

// NexoStatus returns the common status of the NexoDeploymentProfile.
func (o *NexoDeploymentProfile) NexoStatus() *Status { return &o.Status }

// NexoStatus returns the common status of the NexoLicense.
func (o *NexoLicense) NexoStatus() *Status { return &o.Status.Status }

// NexoStatus returns the common status of the NexoRouter.
func (o *NexoRouter) NexoStatus() *Status { return &o.Status }

// NexoStatus returns the common status of the NexoTrafficSplit.
func (o *NexoTrafficSplit) NexoStatus() *Status { return &o.Status }

// NexoStatus returns the common status of the NexoTenantIsolation.
func (o *NexoTenantIsolation) NexoStatus() *Status { return &o.Status }

// NexoStatus returns the common status of the NexoRateLimit.
func (o *NexoRateLimit) NexoStatus() *Status { return &o.Status }

// NexoStatus returns the common status of the NexoCommandPolicy.
func (o *NexoCommandPolicy) NexoStatus() *Status { return &o.Status }

// NexoStatus returns the common status of the NexoAuthPolicy.
func (o *NexoAuthPolicy) NexoStatus() *Status { return &o.Status }

// NexoStatus returns the common status of the NexoPIIMasking.
func (o *NexoPIIMasking) NexoStatus() *Status { return &o.Status }

// NexoStatus returns the common status of the NexoResponseLimit.
func (o *NexoResponseLimit) NexoStatus() *Status { return &o.Status }

// NexoStatus returns the common status of the NexoConnectionPool.
func (o *NexoConnectionPool) NexoStatus() *Status { return &o.Status }

// NexoStatus returns the common status of the NexoConnectionLimit.
func (o *NexoConnectionLimit) NexoStatus() *Status { return &o.Status }

// NexoStatus returns the common status of the NexoMetrics.
func (o *NexoMetrics) NexoStatus() *Status { return &o.Status }

// NexoStatus returns the common status of the NexoTracing.
func (o *NexoTracing) NexoStatus() *Status { return &o.Status }

// NexoStatus returns the common status of the NexoAuditLog.
func (o *NexoAuditLog) NexoStatus() *Status { return &o.Status }

// NexoStatus returns the common status of the NexoAccessLog.
func (o *NexoAccessLog) NexoStatus() *Status { return &o.Status }

// NexoStatus returns the common status of the NexoConnectionPipeline.
func (o *NexoConnectionPipeline) NexoStatus() *Status { return &o.Status.Status }

// NexoStatus returns the common status of the NexoQueryGuard.
func (o *NexoQueryGuard) NexoStatus() *Status { return &o.Status.Status }

// NexoStatus returns the common status of the NexoFieldEncryption.
func (o *NexoFieldEncryption) NexoStatus() *Status { return &o.Status.Status }

// NexoStatus returns the common status of the NexoResultCache.
func (o *NexoResultCache) NexoStatus() *Status { return &o.Status.Status }

// NexoStatus returns the common status of the NexoShadowTraffic.
func (o *NexoShadowTraffic) NexoStatus() *Status { return &o.Status.Status }

// NexoStatus returns the common status of the NexoSchemaValidation.
func (o *NexoSchemaValidation) NexoStatus() *Status { return &o.Status.Status }

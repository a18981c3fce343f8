package targeting

import (
	"fmt"
	"time"
)

// Entitlement is what a tenant's license entitles it to deploy through the Control Plane: at most
// MaxProxies NexoProxies across its environments, until ExpiresAt. The platform admin sets it; a
// tenant's own roles cannot (docs/controlplane.md, "License entitlement"). The operator enforces
// the cluster's license document again in the cluster.
type Entitlement struct {
	MaxProxies int       `json:"maxProxies"`
	ExpiresAt  time.Time `json:"expiresAt"`
}

// Validate refuses an entitlement that could not be meant.
func (e Entitlement) Validate() error {
	switch {
	case e.MaxProxies < 0:
		return fmt.Errorf("maxProxies %d: must be 0 or more", e.MaxProxies)
	case e.ExpiresAt.IsZero():
		return fmt.Errorf("expiresAt is required (RFC 3339, such as 2027-12-31T00:00:00Z)")
	}
	return nil
}

// AllowsDeploy decides a deploy through a stage by the tenant's entitlement (nil: none): at now,
// with deployed proxies already running across the tenant's environments and adding new ones
// in this deploy (a proxy deployed again is not new). The error says why not.
func AllowsDeploy(e *Entitlement, tenant string, now time.Time, deployed, adding int) error {
	switch {
	case e == nil:
		return fmt.Errorf("tenant %s has no license entitlement: the platform admin sets it (controlplane tenant entitlement %s --max-proxies N --expires DATE)", tenant, tenant)
	case !now.Before(e.ExpiresAt):
		return fmt.Errorf("tenant %s's license entitlement expired at %s", tenant, e.ExpiresAt.UTC().Format(time.RFC3339))
	case deployed+adding > e.MaxProxies:
		return fmt.Errorf("tenant %s's license entitlement allows %d proxies: %d deployed and %d new in this deploy would make %d", tenant, e.MaxProxies, deployed, adding, deployed+adding)
	}
	return nil
}

// Package authz is the reference Control Plane's authorization layer (docs/controlplane.md,
// "Targeting"): who is calling (the platform's admin token or a principal's), what each role may
// do (the capability table, capabilities.go), and May, the one decision every tenancy route
// takes. It reads principals from storage and knows nothing of HTTP.
package authz

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nexo-io/nexo-edge/controlplane/storage"
	"github.com/nexo-io/nexo-edge/controlplane/targeting"
)

// The admin token's actor and role, as audit records name them.
const AdminActor, AdminRole = "admin", "admin"

// Caller is who sent a request: the platform's admin token (every action in every tenant) or a
// principal (its bindings, in its own tenant).
type Caller struct {
	Admin     bool
	Principal storage.Principal
}

// Actor is how the caller appears in the audit history.
func (c Caller) Actor() string {
	if c.Admin {
		return AdminActor
	}
	return "principal:" + c.Principal.Tenant + "/" + c.Principal.Name
}

// May returns the role under which c may take action in tenant (project: the project the action
// is in; "" for a tenant-level action). A project's role applies in that project only.
func (c Caller) May(action Action, tenant, project string) (string, bool) {
	if c.Admin {
		return AdminRole, true
	}
	if c.Principal.Tenant != tenant {
		return "", false
	}
	for _, b := range c.Principal.Bindings {
		if b.Project != "" && b.Project != project && !slices.Contains(anyProject, action) {
			continue
		}
		if Can(b.Role, action) {
			return string(b.Role), true
		}
	}
	return "", false
}

// Roles is a principal's bindings ("editor@shop,tenant-admin@tenant"), for the audit of a
// refusal.
func (c Caller) Roles() string {
	if c.Admin {
		return AdminRole
	}
	var out []string
	for _, b := range c.Principal.Bindings {
		scope := b.Project
		if scope == "" {
			scope = "tenant"
		}
		out = append(out, string(b.Role)+"@"+scope)
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ",")
}

// WhoMay names the roles that may take action ("it takes one of tenant-admin, editor").
func WhoMay(action Action) string {
	var roles []string
	for _, r := range targeting.Roles {
		if Can(r, action) {
			roles = append(roles, string(r))
		}
	}
	return "it takes one of " + strings.Join(roles, ", ")
}

// ErrNoToken: the request carries no valid admin or principal token.
var ErrNoToken = errors.New("a valid admin or principal token is required (Authorization: Bearer TOKEN)")

// ExpiredError: the principal's token expired.
type ExpiredError struct{ At time.Time }

func (e ExpiredError) Error() string {
	return fmt.Sprintf("this principal token expired at %s: a tenant admin issues a new one (controlplane principal rotate-token)", e.At.UTC().Format(time.RFC3339))
}

// Authenticator finds the caller of a bearer token.
type Authenticator struct {
	Store *storage.Store
	// AdminToken is the platform's admin token ("" disables it).
	AdminToken string
}

// Authenticate returns the caller of token at now: ErrNoToken without a valid one, an
// ExpiredError for a principal token past its expiry.
func (a Authenticator) Authenticate(ctx context.Context, token string, now time.Time) (Caller, error) {
	if a.AdminToken != "" && subtle.ConstantTimeCompare([]byte(token), []byte(a.AdminToken)) == 1 {
		return Caller{Admin: true}, nil
	}
	if token == "" {
		return Caller{}, ErrNoToken
	}
	p, err := a.Store.PrincipalByToken(ctx, token)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return Caller{}, ErrNoToken
	case err != nil:
		return Caller{}, err
	case !now.Before(p.TokenExpiresAt):
		return Caller{}, ExpiredError{At: p.TokenExpiresAt}
	}
	return Caller{Principal: p}, nil
}

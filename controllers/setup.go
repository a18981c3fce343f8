package controllers

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/event"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/contract/wire"
	"github.com/nexo-io/nexo-edge/controllers/eventpost"
	"github.com/nexo-io/nexo-edge/controllers/slimcache"
)

// Options configure every controller.
type Options struct {
	OperatorNamespace string
	Keys              *TrustedKeys
	RequireSignatures bool
	LicenseKeys       map[string]ed25519.PublicKey
	// Now is the clock for license expiry; time.Now when nil.
	Now func() time.Time
	// ProxyWorkers is the NexoProxy controller's concurrency (default 4).
	ProxyWorkers int
	// Informers is the registry the manager's cache creates its informers through
	// (cache.Options.NewInformer); the NexoProxy controller reads its children's trimmed state
	// from their stores.
	Informers *slimcache.Registry
}

// Setup registers one controller per reconciled kind of the catalog, and none for schema-only
// kinds. It returns the registered kinds.
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) ([]string, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	keyEvents := map[string]chan event.GenericEvent{}
	var registered []string
	for _, k := range catalog.Kinds {
		if k.Support != catalog.Reconciled {
			continue
		}
		ch := make(chan event.GenericEvent, 1024)
		keyEvents[k.Kind] = ch
		var err error
		switch k.Kind {
		case "NexoProxy":
			events := eventpost.New(mgr.GetClient(), mgr.GetScheme(), wire.OperatorName)
			if err := mgr.Add(events); err != nil {
				return nil, err
			}
			err = (&ProxyReconciler{
				Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scheme: mgr.GetScheme(),
				OperatorNamespace: opts.OperatorNamespace, Keys: opts.Keys, RequireSignatures: opts.RequireSignatures,
				Now: opts.Now, KeysChanged: ch, Workers: opts.ProxyWorkers, Recorder: events, Informers: opts.Informers,
			}).SetupWithManager(ctx, mgr)
		case "NexoLicense":
			err = (&LicenseReconciler{
				Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), LicenseKeys: opts.LicenseKeys,
				Keys: opts.Keys, RequireSignatures: opts.RequireSignatures, Now: opts.Now, KeysChanged: ch,
			}).SetupWithManager(ctx, mgr)
		default:
			kind := k
			err = (&ComponentReconciler{
				Client: mgr.GetClient(), Kind: kind, Keys: opts.Keys, RequireSignatures: opts.RequireSignatures, KeysChanged: ch,
				New: func() nexov1alpha1.Object {
					o, _ := mgr.GetScheme().New(nexov1alpha1.GroupVersion.WithKind(kind.Kind))
					return o.(nexov1alpha1.Object)
				},
			}).SetupWithManager(mgr)
		}
		if err != nil {
			return nil, fmt.Errorf("set up %s controller: %w", k.Kind, err)
		}
		registered = append(registered, k.Kind)
	}
	keys := &keysReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Keys: opts.Keys, events: keyEvents}
	if err := keys.SetupWithManager(mgr); err != nil {
		return nil, err
	}
	return registered, nil
}

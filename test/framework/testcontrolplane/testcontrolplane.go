// Package testcontrolplane runs the real reference Control Plane for tests: controlplane.New over
// its own SQLite file, served on loopback. It is the one way a test gets a Control Plane, so a
// change to how the server is built is made here once.
package testcontrolplane

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nexo-io/nexo-edge/controlplane"
	"github.com/nexo-io/nexo-edge/controlplane/storage"
)

// AdminToken is the admin token a Control Plane started here accepts unless Options names one.
const AdminToken = "test-admin-token"

// Options configure Start. The zero value serves a new database with a new signing key.
type Options struct {
	// DB is the SQLite file (kept across Restart); default controlplane.db in a new temp folder.
	DB string
	// Key is the signing key the store is seeded with; default a new one.
	Key ed25519.PrivateKey
	// KeyEncryption seals the stored signing keys; default one derived from Key, so a restart
	// with the same key opens what an earlier run sealed.
	KeyEncryption controlplane.KeyEncrypter
	// AdminToken guards /admin; default AdminToken.
	AdminToken    string
	NextHeartbeat time.Duration
	PublicURL     string
	Now           func() time.Time
	Log           *slog.Logger
	// Checkpoint anchors the audit history in DB + ".audit-checkpoint".
	Checkpoint bool
	// Wrap wraps the Control Plane's handler: fault injection, counting, delays.
	Wrap func(http.Handler) http.Handler
}

// ControlPlane is a running Control Plane.
type ControlPlane struct {
	URL   string
	Admin controlplane.AdminClient
	Key   ed25519.PrivateKey
	DB    string
	// Store and Server are the running ones (replaced by Restart).
	Store  *storage.Store
	Server *controlplane.Server

	opts    Options
	mu      sync.RWMutex
	handler http.Handler
	srv     *httptest.Server
	tmp     string
}

// KEK is a key-encryption key derived from key.
func KEK(key ed25519.PrivateKey) controlplane.KeyEncrypter {
	sum := sha256.Sum256(key.Seed())
	kek, err := controlplane.NewAESKeyEncrypter(sum[:])
	if err != nil {
		panic(err)
	}
	return kek
}

// Start opens the database, builds the server with controlplane.New and serves it on loopback.
func Start(o Options) (*ControlPlane, error) {
	c := &ControlPlane{opts: o}
	if o.DB == "" {
		dir, err := os.MkdirTemp("", "nexo-controlplane-")
		if err != nil {
			return nil, err
		}
		c.tmp, o.DB = dir, filepath.Join(dir, "controlplane.db")
	}
	if o.Key == nil {
		_, o.Key, _ = ed25519.GenerateKey(rand.Reader)
	}
	if o.KeyEncryption == nil {
		o.KeyEncryption = KEK(o.Key)
	}
	if o.AdminToken == "" {
		o.AdminToken = AdminToken
	}
	c.opts, c.Key, c.DB = o, o.Key, o.DB
	if err := c.open(); err != nil {
		c.Stop()
		return nil, err
	}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.RLock()
		h := c.handler
		c.mu.RUnlock()
		h.ServeHTTP(w, r)
	}))
	c.URL = c.srv.URL
	c.Admin = controlplane.AdminClient{URL: c.URL, Token: o.AdminToken}
	return c, nil
}

// StartT is Start for a test, stopped when the test ends.
func StartT(t testing.TB, o Options) *ControlPlane {
	t.Helper()
	c, err := Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

// open opens the store and builds the server over it.
func (c *ControlPlane) open() error {
	store, err := storage.Open(c.opts.DB)
	if err != nil {
		return err
	}
	cfg := controlplane.Config{Store: store, Key: c.opts.Key, KeyEncryption: c.opts.KeyEncryption, AdminToken: c.opts.AdminToken,
		NextHeartbeat: c.opts.NextHeartbeat, PublicURL: c.opts.PublicURL, Now: c.opts.Now, Log: c.opts.Log}
	if c.opts.Checkpoint {
		cfg.Checkpoint = &controlplane.Checkpoint{Path: c.opts.DB + ".audit-checkpoint", Key: c.opts.Key}
	}
	srv, err := controlplane.New(context.Background(), cfg)
	if err != nil {
		_ = store.Close()
		return err
	}
	var h http.Handler = srv.Handler()
	if c.opts.Wrap != nil {
		h = c.opts.Wrap(h)
	}
	c.mu.Lock()
	c.Store, c.Server, c.handler = store, srv, h
	c.mu.Unlock()
	return nil
}

// Restart closes the database and serves a new server over the same file at the same URL, as a
// Control Plane process restarted with its volume.
func (c *ControlPlane) Restart() error {
	c.mu.RLock()
	old := c.Store
	c.mu.RUnlock()
	if err := old.Close(); err != nil {
		return fmt.Errorf("close the store: %w", err)
	}
	return c.open()
}

// Reconfigure restarts the Control Plane with changed options (a new flag), over the same file
// at the same URL.
func (c *ControlPlane) Reconfigure(change func(*Options)) error {
	change(&c.opts)
	return c.Restart()
}

// Stop stops serving and closes the database.
func (c *ControlPlane) Stop() {
	if c.srv != nil {
		c.srv.Close()
	}
	if c.Store != nil {
		_ = c.Store.Close()
	}
	if c.tmp != "" {
		_ = os.RemoveAll(c.tmp)
	}
}

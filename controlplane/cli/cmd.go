// Package cli is the command line of the reference Control Plane: serve, keygen,
// env create/show, command deploy/rollout/upgrade/uninstall (through the admin API).
package cli

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nexo-io/nexo-edge/controlplane/storage"

	"github.com/nexo-io/nexo-edge/contract/buildinfo"

	"github.com/spf13/cobra"

	"github.com/nexo-io/nexo-edge/contract/manifest"
	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/contract/signature"
	"github.com/nexo-io/nexo-edge/controlplane"
)

// NewRootCmd builds the command.
func NewRootCmd(out io.Writer) *cobra.Command {
	root := &cobra.Command{Use: "controlplane", Short: "Reference Nexo Control Plane for tests and local development", SilenceUsage: true,
		Version: buildinfo.String()}
	root.SetVersionTemplate("nexo-controlplane {{.Version}}\n")
	var server, adminTokenFile, principalTokenFile string
	root.PersistentFlags().StringVar(&server, "server", "http://127.0.0.1:8090", "Control Plane URL (admin commands)")
	root.PersistentFlags().StringVar(&adminTokenFile, "admin-token-file", "", "file holding the admin token")
	root.PersistentFlags().StringVar(&principalTokenFile, "token-file", "", "file holding a principal's token (acts as that principal instead of the admin)")
	adminCall := func(method, path string, body, outv any) error {
		file := adminTokenFile
		if principalTokenFile != "" {
			file = principalTokenFile
		}
		tok, err := os.ReadFile(file)
		if err != nil {
			return fmt.Errorf("read the token (--admin-token-file or --token-file): %w", err)
		}
		return controlplane.AdminClient{URL: server, Token: strings.TrimSpace(string(tok))}.Do(method, path, body, outv)
	}
	root.AddCommand(serveCmd(), keygenCmd(out), envCmd(out, adminCall), commandCmd(out, adminCall), signingKeyCmd(out, adminCall), auditCmd(out, adminCall))
	root.AddCommand(tenancyCmds(out, adminCall)...)
	return root
}

func serveCmd() *cobra.Command {
	var db, listen, keyFile, adminTokenFile, cert, key, kekFile, checkpointFile string
	var heartbeat time.Duration
	var insecure bool
	var publicURL string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the Manager protocol and the admin API",
		RunE: func(cmd *cobra.Command, _ []string) error {
			host, _, err := net.SplitHostPort(listen)
			if err != nil {
				return err
			}
			loopback := host == "localhost" || (net.ParseIP(host) != nil && net.ParseIP(host).IsLoopback())
			if cert == "" && !loopback && !insecure {
				return errors.New("TLS is required off loopback: pass --tls-cert and --tls-key (or --insecure for a lab)")
			}
			pem, err := os.ReadFile(keyFile)
			if err != nil {
				return fmt.Errorf("read the signing key (create one with controlplane keygen): %w", err)
			}
			priv, err := signature.ParsePrivateKey(pem)
			if err != nil {
				return err
			}
			adminTok, err := os.ReadFile(adminTokenFile)
			if err != nil {
				return fmt.Errorf("read the admin token: %w", err)
			}
			store, err := storage.Open(db)
			if err != nil {
				return err
			}
			defer store.Close()
			if publicURL == "" {
				scheme := "http"
				if cert != "" {
					scheme = "https"
				}
				publicURL = scheme + "://" + listen
			}
			if kekFile == "" {
				kekFile = db + ".kek"
			}
			kek, created, err := controlplane.LoadKeyEncryptionKey(kekFile, true)
			if err != nil {
				return err
			}
			if created {
				slog.Warn("created a key-encryption key for the signing keys; keep it apart from the database (a Secret, another volume) and back it up: without it the stored signing keys cannot be opened", "file", kekFile)
			}
			if checkpointFile == "" {
				checkpointFile = db + ".audit-checkpoint"
			}
			s, err := controlplane.New(cmd.Context(), controlplane.Config{Store: store, Key: priv, AdminToken: strings.TrimSpace(string(adminTok)), NextHeartbeat: heartbeat, Log: slog.Default(), PublicURL: publicURL,
				KeyEncryption: kek, Checkpoint: &controlplane.Checkpoint{Path: checkpointFile, Key: priv}})
			if err != nil {
				return err
			}
			srv := controlplane.NewHTTPServer(listen, s.Handler())
			go func() { <-cmd.Context().Done(); _ = srv.Shutdown(context.Background()) }()
			slog.Info("control plane listening", "address", listen, "tls", cert != "", "signingKey", signature.KeyID(priv.Public().(ed25519.PublicKey)))
			if cert != "" {
				err = srv.ListenAndServeTLS(cert, key)
			} else {
				err = srv.ListenAndServe()
			}
			if errors.Is(err, http.ErrServerClosed) {
				return nil
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&db, "db", "controlplane.db", "SQLite database file")
	f.StringVar(&listen, "listen", "127.0.0.1:8090", "address to listen on")
	f.StringVar(&keyFile, "signing-key", "controlplane.key", "ed25519 private key (PEM) that signs deploy manifests")
	f.StringVar(&adminTokenFile, "admin-token-file", "admin-token", "file holding the admin API token")
	f.StringVar(&cert, "tls-cert", "", "TLS certificate (required off loopback)")
	f.StringVar(&key, "tls-key", "", "TLS key")
	f.BoolVar(&insecure, "insecure", false, "allow plain HTTP off loopback")
	f.StringVar(&kekFile, "key-encryption-key-file", "", "32-byte key (base64) that seals the signing keys the database holds; created when missing (default: the database path + .kek). Keep it apart from the database")
	f.StringVar(&checkpointFile, "audit-checkpoint", "", "file the signed head of the audit history is written to after every append and checked against on start (default: the database path + .audit-checkpoint); another volume is better")
	f.StringVar(&publicURL, "public-url", "", "the URL Managers reach this Control Plane at, named in install commands (default: the listen address)")
	f.DurationVar(&heartbeat, "heartbeat-interval", 30*time.Second, "nextHeartbeatSeconds sent to Managers")
	return cmd
}

func keygenCmd(out io.Writer) *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "keygen",
		Short: "Create the signing key pair (KEY and KEY.pub)",
		RunE: func(*cobra.Command, []string) error {
			pub, priv, err := ed25519.GenerateKey(rand.Reader)
			if err != nil {
				return err
			}
			if err := os.WriteFile(path, signature.MarshalPrivateKey(priv), 0o600); err != nil {
				return err
			}
			if err := os.WriteFile(path+".pub", signature.MarshalPublicKey(pub), 0o644); err != nil {
				return err
			}
			fmt.Fprintf(out, "wrote %s and %s.pub (key id %s); put the .pub into the operator's trusted-keys Secret\n", path, path, signature.KeyID(pub))
			return nil
		},
	}
	cmd.Flags().StringVar(&path, "out", "controlplane.key", "private key file")
	return cmd
}

type caller func(method, path string, body, out any) error

func envCmd(out io.Writer, call caller) *cobra.Command {
	env := &cobra.Command{Use: "env", Short: "Register and inspect environments"}
	var tokenOut, envTenant, rotateTenant string
	create := &cobra.Command{
		Use:   "create NAME",
		Short: "Register an environment; its connect token is shown once",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			var e controlplane.NewEnvironment
			path := "/admin/environments"
			if envTenant != "" {
				path = "/admin/tenants/" + envTenant + "/environments"
			}
			if err := call("POST", path, map[string]string{"name": args[0]}, &e); err != nil {
				return err
			}
			if tokenOut != "" {
				if err := os.WriteFile(tokenOut, []byte(e.Token), 0o600); err != nil {
					return err
				}
				fmt.Fprintf(out, "environment %s (%s); connect token written to %s (only shown this once)\n", e.ID, e.Name, tokenOut)
				return nil
			}
			fmt.Fprintf(out, "environment %s (%s)\nconnect token (only shown this once):\n%s\n", e.ID, e.Name, e.Token)
			return nil
		},
	}
	create.Flags().StringVar(&tokenOut, "token-out", "", "write the token to this file (mode 0600) instead of printing it")
	create.Flags().StringVar(&envTenant, "tenant", "", "register the environment in this tenant (a tenant admin may)")
	show := &cobra.Command{
		Use:   "show ID",
		Short: "Print an environment's inventory and command history as JSON",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			var v controlplane.EnvironmentView
			if err := call("GET", "/admin/environments/"+args[0], nil, &v); err != nil {
				return err
			}
			enc := json.NewEncoder(out)
			enc.SetIndent("", "  ")
			return enc.Encode(v)
		},
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List environments with their heartbeat state (never, healthy, stale, lost) and age",
		Args:  cobra.NoArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			var envs []controlplane.EnvironmentSummary
			if err := call("GET", "/admin/environments", nil, &envs); err != nil {
				return err
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tNAME\tSTATE\tLAST HEARTBEAT\tAGE")
			for _, e := range envs {
				last, age := "-", "-"
				if e.LastHeartbeat != nil {
					last = e.LastHeartbeat.UTC().Format(time.RFC3339)
				}
				if e.AgeSeconds != nil {
					age = (time.Duration(*e.AgeSeconds) * time.Second).String()
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.ID, e.Name, e.State, last, age)
			}
			return tw.Flush()
		},
	}
	var grace time.Duration
	var newTokenOut string
	rotate := &cobra.Command{
		Use:   "rotate-token ID --token-out FILE",
		Short: "Issue a new connect token; the old one works until the Manager uses the new one or --grace passes",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			var r controlplane.RotatedToken
			path := "/admin/environments/" + args[0] + "/token"
			if rotateTenant != "" { // a tenant admin rotates its own environment's token
				path = "/admin/tenants/" + rotateTenant + "/environments/" + args[0] + "/token"
			}
			if err := call("POST", path, map[string]int64{"graceSeconds": int64(grace.Seconds())}, &r); err != nil {
				return err
			}
			if err := os.WriteFile(newTokenOut, []byte(r.Token), 0o600); err != nil {
				return err
			}
			fmt.Fprintf(out, "new connect token for %s written to %s; install it with: nexoctl install --token-file %s\nthe old token stops working when the Manager first uses the new one, at the latest %s\n",
				args[0], newTokenOut, newTokenOut, r.OldValidUntil.UTC().Format(time.RFC3339))
			return nil
		},
	}
	rotate.Flags().DurationVar(&grace, "grace", controlplane.DefaultTokenGrace, "how long the old token stays valid at the most (at most 168h)")
	rotate.Flags().StringVar(&rotateTenant, "tenant", "", "the environment's tenant: rotate as its tenant admin (--token-file) instead of the admin token")
	rotate.Flags().StringVar(&newTokenOut, "token-out", "", "file for the new token (mode 0600); it is never printed")
	_ = rotate.MarkFlagRequired("token-out")
	install := &cobra.Command{
		Use:   "install-command ID",
		Short: "Print the version-pinned install commands for an environment (nexoctl, Helm, kustomize, OLM Subscription)",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			var ic controlplane.InstallCommand
			if err := call("GET", "/admin/environments/"+args[0]+"/install", nil, &ic); err != nil {
				return err
			}
			values, _ := json.Marshal(ic.HelmValues)
			fmt.Fprintf(out, "# Nexo Edge %s for environment %s; the connect token is the file you saved (never part of these commands)\n", ic.Version, ic.Environment)
			fmt.Fprintf(out, "\n# nexoctl (Helm SDK, chart embedded; --version refuses another nexoctl):\n%s\n", ic.Nexoctl)
			fmt.Fprintf(out, "\n# Helm: the token Secret first, then the chart %s:\n%s\n%s\n", ic.Version, ic.HelmTokenSecret, ic.Helm)
			fmt.Fprintf(out, "# (values: %s)\n", values)
			fmt.Fprintf(out, "\n# kustomize: release %s's entry point, then the installation ConfigMap and the token Secret:\n%s\n", ic.Version, strings.Join(ic.Kustomize, "\n"))
			fmt.Fprintf(out, "\n# OLM: apply this Subscription, then add the token Secret:\n%s\n%s\n", ic.OLMSubscription, ic.OLMTokenSecret)
			return nil
		},
	}
	env.AddCommand(create, show, list, rotate, install)
	env.AddCommand(envTenancyCmds(out, call)...)
	env.AddCommand(envChangeCmds(out, call)...)
	return env
}

func commandCmd(out io.Writer, call caller) *cobra.Command {
	cmd := &cobra.Command{Use: "command", Short: "Queue a command for an environment's Manager"}
	send := func(envID string, c protocol.Command) error {
		var res map[string]string
		if err := call("POST", "/admin/environments/"+envID+"/commands", c, &res); err != nil {
			return err
		}
		fmt.Fprintf(out, "queued %s %s\n", c.Type, res["id"])
		return nil
	}
	proxyRef := func(s string) (*protocol.ObjectRef, error) {
		ns, name, ok := strings.Cut(s, "/")
		if !ok || ns == "" || name == "" {
			return nil, fmt.Errorf("--proxy must be namespace/name, got %q", s)
		}
		return &protocol.ObjectRef{Namespace: ns, Name: name}, nil
	}
	var file string
	var namespaces []string
	deploy := &cobra.Command{
		Use: "deploy ENV -f FILE --namespace NS", Short: "Deploy nexo.io manifests (signed by the Control Plane)", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			objs, err := manifest.Load(file, os.Stdin)
			if err != nil {
				return err
			}
			var manifests []json.RawMessage
			for _, o := range objs {
				j, err := o.MarshalJSON()
				if err != nil {
					return err
				}
				manifests = append(manifests, j)
			}
			return send(args[0], protocol.Command{Type: protocol.Deploy, Namespaces: namespaces, Manifests: manifests})
		},
	}
	deploy.Flags().StringVarP(&file, "filename", "f", "", "manifests: a file or folder (multi-document YAML, JSON, kind: List), - for stdin")
	deploy.Flags().StringSliceVar(&namespaces, "namespace", nil, "namespaces the manifests may go to")
	var image, proxy string
	rollout := &cobra.Command{
		Use: "rollout ENV --image IMAGE [--proxy NS/NAME]", Short: "Set the proxy image on Manager-owned NexoProxies", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			c := protocol.Command{Type: protocol.Rollout, Image: image}
			if proxy != "" {
				ref, err := proxyRef(proxy)
				if err != nil {
					return err
				}
				c.Proxy = ref
			}
			return send(args[0], c)
		},
	}
	rollout.Flags().StringVar(&image, "image", "", "proxy image")
	rollout.Flags().StringVar(&proxy, "proxy", "", "only this NexoProxy (namespace/name)")
	var version string
	upgrade := &cobra.Command{
		Use: "upgrade ENV --version V", Short: "Ask the Manager to move to a bundle version", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return send(args[0], protocol.Command{Type: protocol.Upgrade, TargetVersion: version})
		},
	}
	upgrade.Flags().StringVar(&version, "version", "", "target bundle version")
	var target string
	uninstall := &cobra.Command{
		Use: "uninstall ENV --proxy NS/NAME", Short: "Delete one Manager-owned NexoProxy", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			ref, err := proxyRef(target)
			if err != nil {
				return err
			}
			return send(args[0], protocol.Command{Type: protocol.Uninstall, Proxy: ref})
		},
	}
	uninstall.Flags().StringVar(&target, "proxy", "", "the NexoProxy (namespace/name)")
	cmd.AddCommand(deploy, rollout, upgrade, uninstall)
	return cmd
}

func signingKeyCmd(out io.Writer, call caller) *cobra.Command {
	cmd := &cobra.Command{Use: "signing-key", Short: "Rotate and retire the keys that sign deploy manifests"}
	rotate := &cobra.Command{
		Use:   "rotate",
		Short: "Make a new key active; the previous one stays trusted by Managers until it is retired",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			var r map[string]string
			if err := call("POST", "/admin/signing-keys/rotate", nil, &r); err != nil {
				return err
			}
			fmt.Fprintf(out, "signing key %s is active; Managers add it to the trusted keys at their next heartbeat.\n"+
				"Redeploy what the previous key signed, then retire it: controlplane signing-key retire KEY-ID\n", r["keyId"])
			return nil
		},
	}
	retire := &cobra.Command{
		Use:   "retire KEY-ID",
		Short: "Stop advertising a previous key: Managers drop it, and objects signed only by it stop verifying",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			if err := call("POST", "/admin/signing-keys/"+args[0]+"/retire", nil, nil); err != nil {
				return err
			}
			fmt.Fprintf(out, "signing key %s retired\n", args[0])
			return nil
		},
	}
	cmd.AddCommand(rotate, retire)
	return cmd
}

func auditCmd(out io.Writer, call caller) *cobra.Command {
	cmd := &cobra.Command{Use: "audit", Short: "Read and verify the audit history (append-only, hash-chained)"}
	var f storage.AuditFilter
	var asJSON bool
	list := &cobra.Command{
		Use:   "list [--actor A] [--action A] [--target T] [--decision allowed|refused] [--command ID] [--after SEQ] [--limit N]",
		Short: "List audit records, oldest first; --after SEQ continues from a previous page",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			q := url.Values{}
			for k, v := range map[string]string{"actor": f.Actor, "action": f.Action, "target": f.Target, "decision": f.Decision, "command": f.CommandID} {
				if v != "" {
					q.Set(k, v)
				}
			}
			if f.After > 0 {
				q.Set("after", strconv.FormatInt(f.After, 10))
			}
			if f.Limit > 0 {
				q.Set("limit", strconv.Itoa(f.Limit))
			}
			path := "/admin/audit?"
			if f.Tenant != "" {
				path = "/admin/tenants/" + f.Tenant + "/audit?" // a tenant admin may read it
			}
			var page controlplane.AuditPage
			if err := call("GET", path+q.Encode(), nil, &page); err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(page)
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SEQ\tAT\tACTOR\tROLE\tACTION\tTARGET\tDECISION\tCOMMAND\tREASON")
			for _, r := range page.Records {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Seq, r.At.UTC().Format(time.RFC3339), r.Actor, r.Role, r.Action,
					orDash(r.Target), r.Decision, orDash(r.CommandID), orDash(r.Reason))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if page.Next > 0 {
				fmt.Fprintf(out, "more: controlplane audit list --after %d\n", page.Next)
			}
			return nil
		},
	}
	fl := list.Flags()
	fl.StringVar(&f.Tenant, "tenant", "", "only this tenant's records (a tenant admin reads them with its own --token-file)")
	fl.StringVar(&f.Actor, "actor", "", "only this actor (admin, principal:TENANT/NAME, manager:ENV, unknown)")
	fl.StringVar(&f.Action, "action", "", "only this action (environment.create, command.queue, command.deliver, command.ack, ...)")
	fl.StringVar(&f.Target, "target", "", "only this target (an environment id, a key id)")
	fl.StringVar(&f.Decision, "decision", "", "only allowed or refused")
	fl.StringVar(&f.CommandID, "command", "", "only this command's records (queued, delivered, acknowledged)")
	fl.Int64Var(&f.After, "after", 0, "the records after this one (a page's cursor)")
	fl.IntVar(&f.Limit, "limit", 0, "at most this many records (default 100, at most 1000)")
	fl.BoolVar(&asJSON, "json", false, "print the page as JSON")
	verify := &cobra.Command{
		Use:   "verify",
		Short: "Walk the hash chain; exit 1 naming the first broken record",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			var v storage.AuditVerification
			if err := call("GET", "/admin/audit/verify", nil, &v); err != nil {
				return err
			}
			if !v.OK {
				return fmt.Errorf("the audit history is broken at record %d: %s", v.BrokenAt, v.Reason)
			}
			fmt.Fprintf(out, "the audit history verifies: %d records, head %s\n", v.Records, v.Head)
			if v.Anchor != nil {
				fmt.Fprintf(out, "anchored: record %d matches the checkpoint %s\n", v.Anchor.Seq, v.Anchor.File)
			}
			return nil
		},
	}
	cmd.AddCommand(list, verify)
	return cmd
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

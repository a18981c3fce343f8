// Package cliopts holds what every nexoctl verb shares: streams, cluster flags, output format,
// colour and exit codes. Verbs receive it instead of reading package-level globals.
package cliopts

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/term"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// Exit codes.
const (
	ExitOK      = 0 // everything passed, or only warnings
	ExitFailed  = 1 // a check failed or something is not ready
	ExitCannot  = 2 // usage error, or nexoctl could not run
	DefaultNS   = "nexo-system"
	OutputText  = "text"
	OutputJSON  = "json"
	OutputYAML  = "yaml"
	envNoColour = "NO_COLOR"
)

// Options are the global flags and streams.
type Options struct {
	In       io.Reader
	Out, Err io.Writer
	// Kube are kubectl's cluster flags (--kubeconfig, --context, --cluster, --user, -n, --server,
	// --token, --as, --as-group, --as-uid, --request-timeout, TLS flags), so nexoctl talks to the
	// same cluster, as the same identity, as kubectl with the same flags.
	Kube          *genericclioptions.ConfigFlags
	AllNamespaces bool
	Output        string
}

// New returns Options with kubectl's cluster flags (not yet bound to a flag set).
func New(in io.Reader, out, errOut io.Writer) *Options {
	return &Options{In: in, Out: out, Err: errOut, Kube: genericclioptions.NewConfigFlags(true), Output: OutputText}
}

// ExitError carries an exit code up to main.
type ExitError struct {
	Code int
	Err  error
	// Said: the command already printed what the exit code means (nexoctl diff's changes), so
	// main prints no "Error:" line for it.
	Said bool
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// Fail is an error that exits with code.
func Fail(code int, format string, args ...any) error {
	return &ExitError{Code: code, Err: fmt.Errorf(format, args...)}
}

// Exit is an exit code whose meaning the command already printed.
func Exit(code int) error {
	return &ExitError{Code: code, Err: fmt.Errorf("exit status %d", code), Said: true}
}

// Said reports whether err's meaning was already printed.
func Said(err error) bool {
	var e *ExitError
	return errors.As(err, &e) && e.Said
}

// Code maps an error to an exit code: nil → 0, ExitError → its code, anything else (usage) → 2.
func Code(err error) int {
	if err == nil {
		return ExitOK
	}
	var e *ExitError
	if errors.As(err, &e) {
		return e.Code
	}
	return ExitCannot
}

// NamespaceOr returns -n, or def when it was not given: for the product's own namespace
// (nexo-system), which a kubeconfig context's namespace does not change.
func (o *Options) NamespaceOr(def string) string {
	if o.Kube.Namespace != nil && *o.Kube.Namespace != "" {
		return *o.Kube.Namespace
	}
	return def
}

// ContextNamespace is the namespace for the user's own objects, as kubectl picks it: -n, else
// the kubeconfig context's namespace, else "default".
func (o *Options) ContextNamespace() (string, error) {
	ns, _, err := o.Kube.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", Fail(ExitCannot, "cannot load a kubeconfig: %v (use --kubeconfig or set KUBECONFIG)", err)
	}
	return ns, nil
}

// RESTConfig loads the client config the way kubectl does (--kubeconfig, $KUBECONFIG,
// ~/.kube/config, in-cluster) with every cluster flag applied.
func (o *Options) RESTConfig() (*rest.Config, error) {
	cfg, err := o.Kube.ToRESTConfig()
	if err != nil {
		return nil, Fail(ExitCannot, "cannot load a kubeconfig: %v (use --kubeconfig or set KUBECONFIG)", err)
	}
	return cfg, nil
}

// KubeIn returns the cluster flags with the namespace set to ns (for the Helm SDK, which takes a
// RESTClientGetter and must work in the release namespace).
func (o *Options) KubeIn(ns string) *genericclioptions.ConfigFlags {
	k := o.Kube
	return &genericclioptions.ConfigFlags{
		CacheDir: k.CacheDir, KubeConfig: k.KubeConfig, ClusterName: k.ClusterName, AuthInfoName: k.AuthInfoName,
		Context: k.Context, Namespace: &ns, APIServer: k.APIServer, TLSServerName: k.TLSServerName,
		Insecure: k.Insecure, CertFile: k.CertFile, KeyFile: k.KeyFile, CAFile: k.CAFile, BearerToken: k.BearerToken,
		Impersonate: k.Impersonate, ImpersonateUID: k.ImpersonateUID, ImpersonateGroup: k.ImpersonateGroup,
		Username: k.Username, Password: k.Password, Timeout: k.Timeout, DisableCompression: k.DisableCompression,
		WrapConfigFn: k.WrapConfigFn,
	}
}

// ValidateOutput checks -o.
func (o *Options) ValidateOutput() error {
	switch o.Output {
	case OutputText, OutputJSON, OutputYAML:
		return nil
	}
	return Fail(ExitCannot, "unknown output format %q: use text, json or yaml", o.Output)
}

// Color reports whether to colour: only on a terminal, never with NO_COLOR set.
func (o *Options) Color() bool {
	if _, set := os.LookupEnv(envNoColour); set {
		return false
	}
	f, ok := o.Out.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// ErrIsTerminal reports whether the error stream is a terminal (for progress output).
func (o *Options) ErrIsTerminal() bool {
	f, ok := o.Err.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// PrintData writes v as one JSON or YAML document.
func (o *Options) PrintData(v any) error {
	if o.Output == OutputYAML {
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = o.Out.Write(b)
		return err
	}
	enc := json.NewEncoder(o.Out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

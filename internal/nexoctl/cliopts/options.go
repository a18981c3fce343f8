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
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
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
	In            io.Reader
	Out, Err      io.Writer
	Kubeconfig    string
	Context       string
	Namespace     string
	AllNamespaces bool
	Output        string
}

// ExitError carries an exit code up to main.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// Fail is an error that exits with code.
func Fail(code int, format string, args ...any) error {
	return &ExitError{Code: code, Err: fmt.Errorf(format, args...)}
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

// NamespaceOr returns -n, or def when it was not given.
func (o *Options) NamespaceOr(def string) string {
	if o.Namespace != "" {
		return o.Namespace
	}
	return def
}

// RESTConfig loads the kubeconfig the way kubectl does (--kubeconfig, $KUBECONFIG, ~/.kube/config,
// in-cluster), honouring --context.
func (o *Options) RESTConfig() (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.Kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: o.Context}).ClientConfig()
	if err != nil {
		return nil, Fail(ExitCannot, "cannot load a kubeconfig: %v (use --kubeconfig or set KUBECONFIG)", err)
	}
	return cfg, nil
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

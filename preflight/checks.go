// Package preflight runs nexoctl's checks: ordered categories (linkerd-check style), each check
// with a description, fatal or warning, a retry deadline and a hint. The same checks run
// against a cluster or, for the support matrix and references, offline on a folder of manifests.
package preflight

import (
	"context"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Status of one check.
type Status string

const (
	OK      Status = "ok"
	Warning Status = "warning"
	Error   Status = "error"
	Skipped Status = "skipped"
)

// Check is one named check.
type Check struct {
	// ID is stable across versions (JSON consumers and docs/troubleshooting.md key on it);
	// Description is for people and may change.
	ID          string
	Description string
	// Fatal: an error here skips every later category (nothing after it can be trusted).
	Fatal bool
	// RetryDeadline: a failing check is retried until this long has passed (0: run once).
	RetryDeadline time.Duration
	// Hint tells the user what to do when the check does not pass, as a command they can run:
	// {namespace} is replaced by the namespace checked.
	Hint string
	// Run returns the outcome and a message; details list individual findings.
	Run func(ctx context.Context, e *Env) Outcome
}

// Outcome of a check.
type Outcome struct {
	Status  Status
	Message string
	Details []string
	// Final: retrying cannot help (something is missing, not still starting).
	Final bool
}

func ok(msg string, details ...string) Outcome {
	return Outcome{Status: OK, Message: msg, Details: details}
}
func warn(msg string, details ...string) Outcome {
	return Outcome{Status: Warning, Message: msg, Details: details}
}
func fail(msg string, details ...string) Outcome {
	return Outcome{Status: Error, Message: msg, Details: details}
}

// Category is an ordered group of checks.
type Category struct {
	Name   string
	Checks []Check
}

// Result of one check, as printed and as JSON.
type Result struct {
	ID          string   `json:"id"`
	Description string   `json:"description"`
	Status      Status   `json:"status"`
	Message     string   `json:"message,omitempty"`
	Details     []string `json:"details,omitempty"`
	Hint        string   `json:"hint,omitempty"`
	// Docs is the troubleshooting section for this check, when it did not pass.
	Docs  string `json:"docs,omitempty"`
	Fatal bool   `json:"fatal"`
}

// TroubleshootingURL is the page, one section per check id and condition reason, that hints link.
const TroubleshootingURL = "https://github.com/nexo-io/nexo-edge/blob/main/docs/troubleshooting.md"

// RunOptions adjust Run.
type RunOptions struct {
	// OnRetry is called before a failing check is tried again (a spinner, on a terminal).
	OnRetry func(c Check)
	// OnDone is called after each check (to clear that spinner).
	OnDone func(c Check)
}

// CategoryResult groups results.
type CategoryResult struct {
	Name   string   `json:"name"`
	Checks []Result `json:"checks"`
}

// Report is one run: the single JSON document `nexoctl preflight -o json` prints.
type Report struct {
	Categories []CategoryResult `json:"categories"`
	Errors     int              `json:"errors"`
	Warnings   int              `json:"warnings"`
	// Status is ok, warning or error.
	Status Status `json:"status"`
}

// Run executes the categories in order.
func Run(ctx context.Context, e *Env, categories []Category) Report {
	return RunWith(ctx, e, categories, RunOptions{})
}

// RunWith is Run with progress callbacks.
func RunWith(ctx context.Context, e *Env, categories []Category, opts RunOptions) Report {
	var r Report
	stop := false
	for _, cat := range categories {
		cr := CategoryResult{Name: cat.Name}
		for _, c := range cat.Checks {
			res := Result{ID: c.ID, Description: c.Description, Fatal: c.Fatal}
			if stop {
				res.Status, res.Message = Skipped, "skipped after a fatal check failed"
				cr.Checks = append(cr.Checks, res)
				continue
			}
			out := runWithRetry(ctx, e, c, opts.OnRetry)
			if opts.OnDone != nil {
				opts.OnDone(c)
			}
			res.Status, res.Message, res.Details = out.Status, out.Message, out.Details
			if out.Status != OK {
				res.Hint = strings.ReplaceAll(c.Hint, "{namespace}", e.Namespace)
				res.Docs = TroubleshootingURL + "#" + c.ID
			}
			switch out.Status {
			case Error:
				r.Errors++
				stop = stop || c.Fatal
			case Warning:
				r.Warnings++
			}
			cr.Checks = append(cr.Checks, res)
		}
		r.Categories = append(r.Categories, cr)
	}
	r.Status = OK
	if r.Warnings > 0 {
		r.Status = Warning
	}
	if r.Errors > 0 {
		r.Status = Error
	}
	return r
}

func runWithRetry(ctx context.Context, e *Env, c Check, onRetry func(Check)) Outcome {
	deadline := time.Now().Add(c.RetryDeadline)
	var out Outcome
	_ = wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		out = c.Run(ctx, e)
		if out.Status != Error || out.Final || time.Now().After(deadline) {
			return true, nil
		}
		if onRetry != nil {
			onRetry(c)
		}
		return false, nil
	})
	return out
}

// ByID returns the result of the check with this id.
func (r Report) ByID(id string) (Result, bool) {
	for _, c := range r.Categories {
		for _, res := range c.Checks {
			if res.ID == id {
				return res, true
			}
		}
	}
	return Result{}, false
}

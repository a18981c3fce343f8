// The HTTP layer every route goes through (docs/controlplane.md, "Requests"): a request id,
// one transaction per request that holds the action and its audit record, strict JSON bodies,
// and exactly one answer, an error body at most once. Handlers return errors; endpoint turns
// them into answers and logs every 5xx with the request id.

package controlplane

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/controlplane/storage"
)

// apiError is a refusal with its status code and the message the caller sees.
type apiError struct {
	code int
	msg  string
}

func (e *apiError) Error() string { return e.msg }

// fail returns a refusal with code and message.
func fail(code int, format string, args ...any) error {
	return &apiError{code: code, msg: fmt.Sprintf(format, args...)}
}

// RequestIDHeader carries the id of every request in its answer; a 5xx names it, and the
// Control Plane's log holds the cause under it.
const RequestIDHeader = "X-Request-Id"

// endpoint serves one route: h runs in one transaction (storage.Store.InTx) with its answer held
// back until the transaction commits, so an answer is never sent for a change that was rolled
// back. When action is set, the request is audited: the allowed record in the same transaction
// as what it allowed, a refusal in a transaction of its own after the handler's writes were
// rolled back. Successful reads (GET) are not actions and are not recorded.
func (s *Server) endpoint(action string, h func(w http.ResponseWriter, r *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := randomID(8)
		w.Header().Set(RequestIDHeader, id)
		entry := &auditEntry{}
		r = r.WithContext(context.WithValue(r.Context(), auditKey{}, entry))
		held := &heldResponse{header: w.Header(), code: http.StatusOK}
		err := s.cfg.Store.InTx(r.Context(), func(ctx context.Context) error {
			if err := h(held, r.WithContext(ctx)); err != nil {
				return err
			}
			if action == "" || entry.actor == "" || r.Method == http.MethodGet {
				return nil
			}
			_, err := s.cfg.Store.Audit(ctx, entry.record(action, storage.Allowed, entry.reason))
			return err
		})
		if err == nil {
			held.send(w)
			return
		}
		code, msg := s.answer(r, id, err)
		if action != "" && entry.actor != "" {
			s.auditRefusal(r.Context(), entry, action, msg)
		}
		writeError(w, code, "%s", msg)
	}
}

// answer is the status and message of a failed request: a refusal's own, or for anything else
// a 500 that names the request id and nothing of the cause, which goes to the log.
func (s *Server) answer(r *http.Request, id string, err error) (int, string) {
	var ae *apiError
	var tooLarge *http.MaxBytesError
	code, msg := http.StatusInternalServerError, "internal error (request id "+id+"): the Control Plane's log has the cause"
	switch {
	case errors.As(err, &ae):
		code, msg = ae.code, ae.msg
	case errors.Is(err, storage.ErrConflict):
		code, msg = http.StatusConflict, "already exists"
	case errors.As(err, &tooLarge):
		code, msg = http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is larger than %d bytes", tooLarge.Limit)
	}
	if code >= 500 {
		s.log().Error("request failed", "requestId", id, "method", r.Method, "route", r.Pattern, "status", code, "error", err)
	}
	return code, msg
}

// heldResponse keeps an answer until the request's transaction commits.
type heldResponse struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (h *heldResponse) Header() http.Header         { return h.header }
func (h *heldResponse) WriteHeader(code int)        { h.code = code }
func (h *heldResponse) Write(b []byte) (int, error) { return h.body.Write(b) }

func (h *heldResponse) send(w http.ResponseWriter) {
	w.WriteHeader(h.code)
	_, _ = w.Write(h.body.Bytes())
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, format string, args ...any) {
	writeJSON(w, code, protocol.Error{Error: fmt.Sprintf(format, args...)})
}

// bearer is the token of an "Authorization: Bearer <token>" header; anything else is no token.
func bearer(r *http.Request) string {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return token
}

// Body limits.
const (
	smallBody    = 64 << 10
	manifestBody = 8 << 20
	managerBody  = 1 << 20
)

// decode reads a request's JSON body into v, strictly: Content-Type application/json (415
// otherwise), at most limit bytes (413), no field v does not have, and nothing after the
// object (400).
func decode(r *http.Request, v any, limit int64) error {
	ct := r.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
		return fail(http.StatusUnsupportedMediaType, "the body must be JSON sent as Content-Type: application/json (got %q)", truncate(ct, 64))
	}
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, limit))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return err
		}
		return fail(http.StatusBadRequest, "the body is not valid for this request: %s", truncate(err.Error(), 200))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fail(http.StatusBadRequest, "the body holds more than one JSON value: send exactly one object")
	}
	return nil
}

// decodeName reads a {"name"} body and checks the name with valid (validName, validDisplayName).
func decodeName(r *http.Request, what string, valid func(what, name string) error) (string, error) {
	var req struct {
		Name string `json:"name"`
	}
	if err := decode(r, &req, smallBody); err != nil {
		return "", err
	}
	return req.Name, valid(what, req.Name)
}

// pathValue is a segment of an API path: names and ids, nothing else reaches a handler, a log
// or the audit history.
var pathValue = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)

// validPath refuses a request whose path values are not names or ids.
func validPath(r *http.Request) error {
	for _, k := range []string{"tenant", "project", "stage", "env", "namespace", "principal", "role", "key", "id", "revision"} {
		if v := r.PathValue(k); v != "" && !pathValue.MatchString(v) {
			return fail(http.StatusBadRequest, "the %s in the path is not a name (letters, digits, '.', '_', ':', '-'; at most 128)", k)
		}
	}
	return nil
}

// maxDisplayName bounds an environment's name, which is free text shown by env list.
const maxDisplayName = 100

// validDisplayName refuses an environment name that is empty, longer than maxDisplayName
// characters, not UTF-8, padded with spaces, or holds a control character (newlines, terminal
// escapes).
func validDisplayName(what, name string) error {
	switch {
	case strings.TrimSpace(name) == "":
		return fail(http.StatusBadRequest, "a %s name is required", what)
	case !utf8.ValidString(name):
		return fail(http.StatusBadRequest, "the %s name is not UTF-8", what)
	case utf8.RuneCountInString(name) > maxDisplayName:
		return fail(http.StatusBadRequest, "the %s name is longer than %d characters", what, maxDisplayName)
	case strings.TrimSpace(name) != name:
		return fail(http.StatusBadRequest, "the %s name starts or ends with a space", what)
	}
	for _, c := range name {
		if !unicode.IsPrint(c) {
			return fail(http.StatusBadRequest, "the %s name holds a control or non-printable character (%U)", what, c)
		}
	}
	return nil
}

func (s *Server) log() *slog.Logger {
	if s.cfg.Log != nil {
		return s.cfg.Log
	}
	return slog.Default()
}

// validName refuses a name that is not a DNS label (tenants, principals, projects, stages,
// namespaces).
func validName(what, name string) error {
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		return fail(http.StatusBadRequest, "%s %q: %s", what, truncate(name, 80), strings.Join(errs, "; "))
	}
	return nil
}

package v1alpha1

// Condition types and reasons of every Nexo kind, in one place: the operator sets them, nexoctl
// and the docs (docs/troubleshooting.md) read them. A reason is a CamelCase word a person can
// look up; the message beside it says what to do.

// Condition types shared by every Nexo kind.
const (
	// ConditionReady is present on every Nexo object.
	ConditionReady = "Ready"
	// ConditionSignatureValid reports the managed-resource signature check.
	ConditionSignatureValid = "SignatureValid"
)

// NexoProxy condition types, in the order the reconcile's phases set them.
const (
	ConditionValidated          = "Validated"
	ConditionReferencesResolved = "ReferencesResolved"
	ConditionLicensed           = "Licensed"
	ConditionWorkloadAvailable  = "WorkloadAvailable"
)

// ProxyPhases are the NexoProxy conditions before Ready, in order. A blocked phase leaves the
// later ones Unknown (Blocked).
var ProxyPhases = []string{ConditionValidated, ConditionReferencesResolved, ConditionLicensed, ConditionWorkloadAvailable}

// Reasons of a component's Ready condition (and a proxy's Validated): the object's own rules.
const (
	ReasonValid       = "Valid"
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonInvalidReference: a reference names a kind that does not exist or is not allowed
	// in its slot.
	ReasonInvalidReference = "InvalidReference"
	// ReasonUnsupportedReference: a reference names a schema-only kind this build does not
	// reconcile; it can never become ready.
	ReasonUnsupportedReference = "UnsupportedReference"
)

// Reasons of SignatureValid (and of Ready, when the signature fails).
const (
	ReasonSigned            = "Signed"
	ReasonUnsigned          = "Unsigned"
	ReasonUnknownSigningKey = "UnknownSigningKey"
	ReasonSignatureMismatch = "SignatureMismatch"
	// ReasonSignatureReplayed: a valid signature with a lower revision than the one accepted.
	ReasonSignatureReplayed = "SignatureReplayed"
	// ReasonWrongAudience: signed for another environment.
	ReasonWrongAudience = "WrongAudience"
)

// NexoLicense Ready reasons.
const (
	ReasonLicenseValid      = "Valid"
	ReasonLicenseExpiring   = "ExpiringSoon"
	ReasonLicenseExpired    = "Expired"
	ReasonSecretNotFound    = "SecretNotFound"
	ReasonSecretKeyMissing  = "SecretKeyMissing"
	ReasonLicenseMalformed  = "Malformed"
	ReasonLicenseUnknownKey = "UnknownSigningKey"
	ReasonLicenseBadSig     = "SignatureInvalid"
	ReasonLicenseeMismatch  = "LicenseeMismatch"
)

// NexoProxy reasons: a phase that passed, a phase that is blocked, the workload.
const (
	ReasonPassed  = "Passed"
	ReasonBlocked = "Blocked"

	// ReferencesResolved.
	ReasonReferenceNotFound = "ReferenceNotFound"
	ReasonReferenceNotReady = "ReferenceNotReady"
	// ReasonPullSecretNotShareable: a profile names a Secret of the operator namespace that is
	// not a registry credential marked shareable by the installer.
	ReasonPullSecretNotShareable = "PullSecretNotShareable"
	// ReasonPortConflict: an attached NexoMetrics listens on the proxy's own port, so the proxy
	// Service would list one port twice (the API server refuses it).
	ReasonPortConflict = "PortConflict"
	// ReasonImageNotApproved: spec.proxyImage is not among the images the proxy's
	// NexoDeploymentProfile approves (spec.images, spec.approvedImages).
	ReasonImageNotApproved = "ImageNotApproved"

	// Licensed.
	ReasonLicenseNotReady    = "LicenseNotReady"
	ReasonMissingEntitlement = "MissingEntitlement"
	ReasonLicenseExhausted   = "LicenseExhausted"

	// WorkloadAvailable and Ready.
	// ReasonConflict: a child name is taken by an object the proxy does not own.
	ReasonConflict    = "Conflict"
	ReasonApplyFailed = "ApplyFailed"
	ReasonAvailable   = "Available"
	ReasonProgressing = "Progressing"
	// ReasonRolloutStalled: the Deployment reports ProgressDeadlineExceeded.
	ReasonRolloutStalled = "RolloutStalled"
)

// Event reasons beyond the condition reasons (which name the Ready transitions).
const (
	EventRolloutStarted  = "RolloutStarted"
	EventRolloutComplete = "RolloutComplete"
)

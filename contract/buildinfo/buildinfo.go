// Package buildinfo is a build's identity: the release version (the catalog's BuildVersion, the
// one place a version is written), and the build stamp and source commit a release build links
// in. Every binary prints it with --version, and the Manager reports it in its heartbeat.
package buildinfo

import (
	"strings"

	"github.com/nexo-io/nexo-edge/catalog"
)

// StampVar and CommitVar are the variables a release build sets with -ldflags -X.
const (
	StampVar  = "github.com/nexo-io/nexo-edge/contract/buildinfo.Stamp"
	CommitVar = "github.com/nexo-io/nexo-edge/contract/buildinfo.Commit"
)

// Stamp (when it was built, as YYYYMMDD.HHMM or any build counter) and Commit (the source
// commit) are set at link time; both are empty in a plain go build.
var Stamp, Commit string

// Version is the release version of this build.
const Version = catalog.BuildVersion

// String is "<version>+<stamp>-<commit>" (for example "0.2.0+20260613.371-384b887"), or the bare
// version for a build that was not stamped.
func String() string {
	if Stamp == "" && Commit == "" {
		return Version
	}
	return Version + "+" + strings.Trim(Stamp+"-"+Commit, "-")
}

// LinkFlags returns the -ldflags -X arguments that stamp a build with stamp and commit.
func LinkFlags(stamp, commit string) string {
	return "-X " + StampVar + "=" + stamp + " -X " + CommitVar + "=" + commit
}

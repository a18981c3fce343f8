package catalog

import (
	"strconv"

	"github.com/blang/semver/v4"
)

// Channels are the OLM channels a version is published in, named as the semver catalog
// template names them (docs/upgrade.md): every version enters candidate-v<major>; a version
// without a prerelease suffix also enters stable-v<major>.
func Channels(version string) []string {
	v := semver.MustParse(version)
	major := strconv.FormatUint(v.Major, 10)
	if len(v.Pre) > 0 {
		return []string{"candidate-v" + major}
	}
	return []string{"candidate-v" + major, "stable-v" + major}
}

// DefaultChannel is the channel a Subscription to version follows by default: the most stable
// one it is in.
func DefaultChannel(version string) string {
	ch := Channels(version)
	return ch[len(ch)-1]
}

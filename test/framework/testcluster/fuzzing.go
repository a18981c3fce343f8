package testcluster

import "flag"

// Fuzzing reports whether this test binary was started to fuzz (go test -fuzz, or one of its
// fuzzing workers). Fuzz targets are pure, so a TestMain can skip starting a cluster then: the
// coordinator and every worker would each start one. Call it after flag.Parse.
func Fuzzing() bool {
	for _, name := range []string{"test.fuzz", "test.fuzzworker"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != "" && f.Value.String() != "false" {
			return true
		}
	}
	return false
}

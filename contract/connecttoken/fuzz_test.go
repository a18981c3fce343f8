package connecttoken_test

import (
	"strings"
	"testing"

	"github.com/nexo-io/nexo-edge/contract/connecttoken"
)

// FuzzParse: arbitrary tokens never panic; a refusal never repeats the token; an accepted token
// names a valid environment that New can issue tokens for.
func FuzzParse(f *testing.F) {
	good, _ := connecttoken.New("env0fuzz01")
	f.Add(good)
	f.Add(good + "\n")
	f.Add("nxct_env_x")
	f.Add("")
	f.Fuzz(func(t *testing.T, token string) {
		env, err := connecttoken.Parse(token)
		if err != nil {
			if err.Error() == "" || len(token) > 8 && strings.Contains(err.Error(), token) {
				t.Fatalf("refusal %q for %q", err, token)
			}
			return
		}
		again, err := connecttoken.New(env)
		if err != nil {
			t.Fatalf("accepted token names environment %q, which New refuses: %v", env, err)
		}
		if e2, err := connecttoken.Parse(again); err != nil || e2 != env {
			t.Fatalf("round trip: %q %v", e2, err)
		}
	})
}

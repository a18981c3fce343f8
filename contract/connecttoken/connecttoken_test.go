package connecttoken_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/nexo-io/nexo-edge/contract/connecttoken"
)

func TestParse(t *testing.T) {
	tok, err := connecttoken.New("demo1234")
	if err != nil {
		t.Fatal(err)
	}
	if env, err := connecttoken.Parse(tok); err != nil || env != "demo1234" {
		t.Fatalf("Parse(valid) = %q, %v", env, err)
	}
	for name, c := range map[string]struct {
		in   string
		want error
	}{
		"empty":            {"", connecttoken.ErrEmpty},
		"trailing newline": {tok + "\n", connecttoken.ErrWhitespace},
		"leading space":    {" " + tok, connecttoken.ErrWhitespace},
		"wrong prefix":     {strings.Replace(tok, "nxct_", "tok_", 1), connecttoken.ErrFormat},
		"short secret":     {tok[:len(tok)-3], connecttoken.ErrFormat},
		"bad env":          {"nxct_AB_" + tok[len(tok)-43:], connecttoken.ErrFormat},
	} {
		if _, err := connecttoken.Parse(c.in); !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", name, err, c.want)
		} else if c.in != "" && strings.Contains(err.Error(), strings.TrimSpace(c.in)) {
			t.Errorf("%s: error leaks the token", name)
		}
	}
	if connecttoken.Hash(tok) == tok || len(connecttoken.Hash(tok)) != 64 {
		t.Error("hash")
	}
}

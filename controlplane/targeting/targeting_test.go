package targeting

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nexo-io/nexo-edge/contract/protocol"
)

// The source document's example: a stage selecting env=production, team=payments matches an
// environment labelled env=production, team=payments, region=eu-west (extra labels do not
// matter), and not one labelled env=staging; an empty selector matches nothing.
func TestLabelMatchingExample(t *testing.T) {
	stage := Selector{"env": "production", "team": "payments"}
	if !stage.Matches(map[string]string{"env": "production", "team": "payments", "region": "eu-west"}) {
		t.Error("env=production,team=payments does not match env=production,team=payments,region=eu-west")
	}
	if stage.Matches(map[string]string{"env": "staging", "team": "payments"}) {
		t.Error("a staging environment matches")
	}
	if got := stage.Missing(map[string]string{"team": "payments"}); strings.Join(got, ",") != "env=production" {
		t.Errorf("missing %v", got)
	}
	if (Selector{}).Matches(map[string]string{"env": "production"}) {
		t.Error("an empty selector matches")
	}
}

func TestSelectorsAreExactLabels(t *testing.T) {
	for _, bad := range []Selector{{}, {"env in (a,b)": "x"}, {"!team": ""}, {"env": "a||b"}, {"env": "prod uction"}} {
		if err := ValidateSelector("stage prod", bad); err == nil {
			t.Errorf("%v accepted", bad)
		} else if len(bad) > 0 && !strings.Contains(err.Error(), "not expressions") {
			t.Errorf("%v: %v", bad, err)
		}
	}
	if err := ValidateSelector("stage prod", Selector{"env": "production", "nexo.io/team": "payments"}); err != nil {
		t.Error(err)
	}
}

// Targets of a stage: eligible by labels, deployable only where the cluster allows; other
// tenants' environments are not listed; every row that is not deployable says why.
func TestTargets(t *testing.T) {
	stage := Stage{Project: "shop", Name: "prod", Environments: Selector{"env": "production", "team": "payments"}, NamespaceTargets: Selector{"tier": "web"}}
	envs := []Environment{
		{ID: "eu", Tenant: "acme", Labels: map[string]string{"env": "production", "team": "payments", "region": "eu-west"}, Limits: &protocol.Limits{Namespaces: []string{"web-a"}},
			Targets: []NamespaceTarget{{"web-a", map[string]string{"tier": "web"}}, {"web-b", map[string]string{"tier": "web"}}, {"db", map[string]string{"tier": "data"}}}},
		{ID: "staging", Tenant: "acme", Labels: map[string]string{"env": "staging", "team": "payments"}, Targets: []NamespaceTarget{{"web", map[string]string{"tier": "web"}}}},
		{ID: "new", Tenant: "acme", Labels: map[string]string{"env": "production", "team": "payments"}, Targets: []NamespaceTarget{{"web", map[string]string{"tier": "web"}}}},
		{ID: "bare", Tenant: "acme", Labels: map[string]string{"env": "production", "team": "payments"}},
		{ID: "theirs", Tenant: "globex", Labels: map[string]string{"env": "production", "team": "payments"}, Limits: &protocol.Limits{Namespaces: []string{"*"}},
			Targets: []NamespaceTarget{{"web", map[string]string{"tier": "web"}}}},
	}
	var got []string
	for _, tg := range Targets("acme", stage, envs) {
		got = append(got, fmt.Sprintf("%s/%s eligible=%v deployable=%v %s", tg.Environment, tg.Namespace, tg.Eligible, tg.Deployable, strings.Join(tg.Reasons, "; ")))
	}
	want := []string{
		"bare/ eligible=false deployable=false the environment has no namespace targets",
		"eu/db eligible=false deployable=false the namespace target's labels lack tier=web",
		"eu/web-a eligible=true deployable=true ",
		"eu/web-b eligible=true deployable=false eligible, refused by the cluster: web-b is not among the namespaces its Manager may deploy into",
		"new/web eligible=true deployable=false eligible, but the cluster has not reported which namespaces it allows",
		"staging/ eligible=false deployable=false the environment's labels lack env=production",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("targets:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// BenchmarkTargets1000x20: a stage's targets over 1,000 environments with 20 namespace targets
// each (half the environments and half the targets selected, the cluster allowing half).
func BenchmarkTargets1000x20(b *testing.B) {
	stage := Stage{Environments: Selector{"env": "production", "team": "payments"}, NamespaceTargets: Selector{"tier": "web"}}
	envs := make([]Environment, 1000)
	for i := range envs {
		env := "production"
		if i%2 == 1 {
			env = "staging"
		}
		e := Environment{ID: fmt.Sprintf("env-%04d", i), Tenant: "acme", Labels: map[string]string{"env": env, "team": "payments", "region": "eu-west"}, Limits: &protocol.Limits{}}
		for j := 0; j < 20; j++ {
			tier := "web"
			if j%2 == 1 {
				tier = "data"
			}
			ns := fmt.Sprintf("ns-%02d", j)
			e.Targets = append(e.Targets, NamespaceTarget{Namespace: ns, Labels: map[string]string{"tier": tier}})
			if j%4 < 2 {
				e.Limits.Namespaces = append(e.Limits.Namespaces, ns)
			}
		}
		envs[i] = e
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if len(Targets("acme", stage, envs)) != 500*20+500 {
			b.Fatal("wrong row count")
		}
	}
}

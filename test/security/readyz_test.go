package security_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/nexo-io/nexo-edge/operator"
	"github.com/nexo-io/nexo-edge/test/framework/reliabilityreport"
	"github.com/nexo-io/nexo-edge/test/framework/testcluster"
	"github.com/nexo-io/nexo-edge/test/framework/testinstall"
)

// cutProxy forwards TCP to target until cut: then every open connection is closed and new ones
// are refused at once, as when the API server goes away (TLS stays end to end).
type cutProxy struct {
	lis    net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  map[net.Conn]bool
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{lis: lis, target: target, conns: map[net.Conn]bool{}}
	t.Cleanup(func() { _ = lis.Close(); p.setCut(true) })
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if p.cut {
				p.mu.Unlock()
				_ = c.Close()
				continue
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				p.mu.Unlock()
				_ = c.Close()
				continue
			}
			p.conns[c], p.conns[up] = true, true
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); _ = up.Close() }()
			go func() { _, _ = io.Copy(c, up); _ = c.Close() }()
		}
	}()
	return p
}

func (p *cutProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for c := range p.conns {
			_ = c.Close()
		}
		p.conns = map[net.Conn]bool{}
	}
}

// TestReadyzIsHonest: the operator (as the chart's ServiceAccount) reports ready only once its
// caches have synced and while the API server answers: cut the connection and /readyz fails;
// restore it and /readyz recovers, without a restart.
func TestReadyzIsHonest(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	saCfg, err := testinstall.Operator(ctx, cluster)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(saCfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	proxy := newCutProxy(t, u.Host)
	cfg := rest.CopyConfig(saCfg)
	cfg.Host = "https://" + proxy.lis.Addr().String()
	port, _ := testcluster.FreePort()
	mgr, _, err := operator.New(ctx, cfg, operator.Config{
		MetricsAddr: "0", ProbeAddr: fmt.Sprintf("127.0.0.1:%d", port), OperatorNamespace: testinstall.Namespace,
		WatchNamespaces: []string{"shop"}, TrustedKeysSecret: "nexo-trusted-keys", EnvironmentID: "0123456789ab", SkipNameValidation: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() { cancel(); <-done }()
	readyz := func() int {
		c := http.Client{Timeout: 5 * time.Second}
		resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", port))
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	waitFor := func(what string, ok func(int) bool) {
		t.Helper()
		last := 0
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			last = readyz()
			return ok(last), nil
		}); err != nil {
			t.Fatalf("%s: /readyz answered %d", what, last)
		}
	}
	waitFor("ready once the caches synced", func(c int) bool { return c == http.StatusOK })
	proxy.setCut(true)
	cut := time.Now()
	waitFor("not ready while the API server does not answer", func(c int) bool { return c == http.StatusInternalServerError })
	noticed := time.Since(cut)
	proxy.setCut(false)
	healed := time.Now()
	waitFor("ready again once the API server answers", func(c int) bool { return c == http.StatusOK })
	reliabilityreport.Figure(t, "operator /readyz with the API server cut off", fmt.Sprintf("not ready before the caches synced; not ready %.1fs after the cut; ready %.1fs after the API server answered again, without a restart", noticed.Seconds(), time.Since(healed).Seconds()))
}

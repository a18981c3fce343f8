package testcluster_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nexo-io/nexo-edge/test/framework/testcluster"
)

// A restarted API server serves the same data on the same address to the same credentials, and
// refuses connections while it is down.
func TestRestartAPIServerKeepsDataAndCredentials(t *testing.T) {
	ctx := context.Background()
	c, err := testcluster.Start(ctx, testcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	cs := kubernetes.NewForConfigOrDie(c.Config)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "before", Namespace: "default"}, Data: map[string]string{"k": "v"}}
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 2; round++ { // envtest's process, then the one the first restart started
		down := make(chan error, 1)
		go func() {
			time.Sleep(1500 * time.Millisecond) // inside the downtime below
			_, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "before", metav1.GetOptions{})
			down <- err
		}()
		if err := c.RestartAPIServer(ctx, 3*time.Second); err != nil {
			t.Fatalf("restart %d: %v", round, err)
		}
		if err := <-down; err == nil {
			t.Errorf("restart %d: a read during the downtime succeeded", round)
		}
		got, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "before", metav1.GetOptions{})
		if err != nil || got.Data["k"] != "v" {
			t.Fatalf("restart %d: read after restart: %v %v", round, got, err)
		}
	}
}

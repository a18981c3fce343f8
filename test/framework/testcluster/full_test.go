package testcluster_test

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/nexo-io/nexo-edge/test/framework/testcluster"
)

// TestFullClusterSmoke proves the full mode: a Deployment becomes Available with Ready pods
// scheduled on simulated nodes, and deleting it garbage-collects its ReplicaSet and pods.
func TestFullClusterSmoke(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := testcluster.Start(ctx, testcluster.Options{
		Mode:  testcluster.Full,
		Nodes: []testcluster.Node{{Name: "node-a", Region: "eu-west-1", Zone: "eu-west-1a"}, {Name: "node-b", Region: "eu-west-1", Zone: "eu-west-1b"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	cs := kubernetes.NewForConfigOrDie(c.Config)

	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: corev1.LabelTopologyZone})
	if err != nil || len(nodes.Items) != 2 {
		t.Fatalf("want 2 nodes with zone labels, got %v (%v)", len(nodes.Items), err)
	}

	labels := map[string]string{"app": "smoke"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "smoke", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/smoke:1"}}},
			},
		},
	}
	if _, err := cs.AppsV1().Deployments("default").Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		d, err := cs.AppsV1().Deployments("default").Get(ctx, "smoke", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range d.Status.Conditions {
			if cond.Type == appsv1.DeploymentAvailable && cond.Status == corev1.ConditionTrue && d.Status.ReadyReplicas == 3 {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("Deployment never became Available with 3 ready replicas: %v\ncontroller-manager:\n%s\nkwok:\n%s",
			err, c.LogTail("kube-controller-manager", 20), c.LogTail("kwok", 20))
	}
	pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=smoke"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" || p.Status.Phase != corev1.PodRunning {
			t.Errorf("pod %s: node %q phase %s", p.Name, p.Spec.NodeName, p.Status.Phase)
		}
	}
	rs, err := cs.AppsV1().ReplicaSets("default").List(ctx, metav1.ListOptions{LabelSelector: "app=smoke"})
	if err != nil || len(rs.Items) != 1 {
		t.Fatalf("want one ReplicaSet, got %d (%v)", len(rs.Items), err)
	}

	if err := cs.AppsV1().Deployments("default").Delete(ctx, "smoke", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		rs, err := cs.AppsV1().ReplicaSets("default").List(ctx, metav1.ListOptions{LabelSelector: "app=smoke"})
		if err != nil {
			return false, err
		}
		pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=smoke"})
		if err != nil {
			return false, err
		}
		return len(rs.Items) == 0 && len(pods.Items) == 0, nil
	})
	if err != nil {
		t.Fatalf("ReplicaSet and pods were not garbage-collected: %v", err)
	}
}

// TestStopEndsEveryProcess checks that Stop leaves none of the processes Start spawned alive.
func TestStopEndsEveryProcess(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := testcluster.Start(ctx, testcluster.Options{Mode: testcluster.Full})
	if err != nil {
		t.Fatal(err)
	}
	pids := c.Pids()
	if len(pids) != 3 {
		t.Errorf("full mode spawned %d processes, want 3 (controller-manager, scheduler, kwok)", len(pids))
	}
	dir := c.Dir
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if processAlive(pid) {
			t.Errorf("process %d still running after Stop", pid)
		}
	}
	if _, err := statDir(dir); err == nil {
		t.Errorf("state folder %s left behind", dir)
	}
}

package controllers_test

import (
	"strings"
	"testing"
	"unsafe"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nexo-io/nexo-edge/controllers"
	"github.com/nexo-io/nexo-edge/render"
)

func fullMeta() metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: "p", Namespace: "ns", UID: "u1", ResourceVersion: "42", Generation: 3,
		Labels:      map[string]string{"a": "b"},
		Annotations: map[string]string{"other": "x"},
		OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "v1", Kind: "ConfigMap", Name: "not-controller", UID: "u2"},
			{APIVersion: "nexo.io/v1alpha1", Kind: "NexoProxy", Name: "p", UID: "u3", Controller: ptr.To(true)},
		},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}},
		Finalizers:    []string{"f"},
	}
}

func TestTrimMetadataKeepsWhatTheControllerReads(t *testing.T) {
	m := &metav1.PartialObjectMetadata{ObjectMeta: fullMeta()}
	out, _ := controllers.TrimMetadata(m)
	got := out.(*metav1.PartialObjectMetadata).ObjectMeta
	want := metav1.ObjectMeta{Name: "p", Namespace: "ns", ResourceVersion: "42", Generation: 3,
		OwnerReferences: []metav1.OwnerReference{fullMeta().OwnerReferences[1]}}
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("trimmed metadata\n got %+v\nwant %+v", got, want)
	}
	again, _ := controllers.TrimMetadata(out)
	if !equality.Semantic.DeepEqual(again.(*metav1.PartialObjectMetadata).ObjectMeta, want) {
		t.Error("TrimMetadata is not idempotent")
	}
	// Anything else passes through unchanged (tombstones, other types).
	cm := &corev1.ConfigMap{ObjectMeta: fullMeta()}
	if out, _ := controllers.TrimMetadata(cm); !equality.Semantic.DeepEqual(out, &corev1.ConfigMap{ObjectMeta: fullMeta()}) {
		t.Error("TrimMetadata changed an object that is not PartialObjectMetadata")
	}
}

func TestTrimDeploymentKeepsLabelsReplicasAndCounts(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: fullMeta(),
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "ingress", Image: "i"}}}}},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 1, AvailableReplicas: 1,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Message: "long text"}}}}
	out, _ := controllers.TrimDeployment(d)
	got := out.(*appsv1.Deployment)
	if got.Labels["a"] != "b" || len(got.Annotations) != 0 || len(got.OwnerReferences) != 1 {
		t.Errorf("metadata %+v", got.ObjectMeta)
	}
	if *got.Spec.Replicas != 2 || len(got.Spec.Template.Spec.Containers) != 0 {
		t.Errorf("spec %+v", got.Spec)
	}
	want := appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 1, AvailableReplicas: 1}
	if !equality.Semantic.DeepEqual(got.Status, want) {
		t.Errorf("status %+v", got.Status)
	}
}

// Strings every child repeats are kept once: two decoded objects share the owner's kind and the
// operator's label values after trimming.
func TestTrimSharesRepeatedStrings(t *testing.T) {
	decoded := func() *appsv1.Deployment {
		m := fullMeta()
		m.OwnerReferences[1].Kind = strings.Clone("NexoProxy")
		m.Labels = map[string]string{strings.Clone(render.ManagedByLabel): strings.Clone(render.ManagedByValue)}
		return &appsv1.Deployment{ObjectMeta: m}
	}
	a, _ := controllers.TrimDeployment(decoded())
	b, _ := controllers.TrimDeployment(decoded())
	da, db := a.(*appsv1.Deployment), b.(*appsv1.Deployment)
	if unsafe.StringData(da.OwnerReferences[0].Kind) != unsafe.StringData(db.OwnerReferences[0].Kind) {
		t.Error("owner kind is not shared between cached objects")
	}
	if unsafe.StringData(da.Labels[render.ManagedByLabel]) != unsafe.StringData(db.Labels[render.ManagedByLabel]) {
		t.Error("label value is not shared between cached objects")
	}
}

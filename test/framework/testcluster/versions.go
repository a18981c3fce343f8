package testcluster

import (
	"context"
	"reflect"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nexo-io/nexo-edge/catalog"
)

// ResourceVersions are the resourceVersions of every Nexo object in namespace ns, and of every
// object of the lists given (&appsv1.DeploymentList{}, …), by "Kind/name": what a test compares
// to show that something (a preview, a diff) wrote nothing.
func ResourceVersions(ctx context.Context, c client.Client, ns string, lists ...client.ObjectList) (map[string]string, error) {
	for _, k := range catalog.Kinds {
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion(catalog.Group + "/" + catalog.Version)
		list.SetKind(k.Kind + "List")
		lists = append(lists, list)
	}
	out := map[string]string{}
	for _, list := range lists {
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return nil, err
		}
		err := meta.EachListItem(list, func(o runtime.Object) error {
			m, err := meta.Accessor(o)
			if err != nil {
				return err
			}
			kind := o.GetObjectKind().GroupVersionKind().Kind
			if kind == "" {
				kind = reflect.TypeOf(o).Elem().Name()
			}
			out[kind+"/"+m.GetName()] = m.GetResourceVersion()
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

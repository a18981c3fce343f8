package statuscmd

import (
	"context"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/kubectl/pkg/cmd/get"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/contract/scheme"
	"github.com/nexo-io/nexo-edge/nexoctl/cliopts"
)

// OutputWide is the table with the revisions a rollback needs (available, previous).
const OutputWide = "wide"

// objectFormat reports whether -o asks for kubectl's printers over the NexoProxy objects
// themselves: name, jsonpath=, jsonpath-as-json=, jsonpath-file=, go-template=,
// go-template-file=, template=, templatefile=, custom-columns=, custom-columns-file=.
func objectFormat(output string) bool {
	if output == "name" {
		return true
	}
	format, _, ok := strings.Cut(output, "=")
	if !ok {
		return false
	}
	switch format {
	case "jsonpath", "jsonpath-as-json", "jsonpath-file", "go-template", "go-template-file", "template", "templatefile", "custom-columns", "custom-columns-file":
		return true
	}
	return false
}

// objectPrinter is cli-runtime's printer for -o (kubectl's custom-columns printer for
// custom-columns=), as kubectl get builds it.
func objectPrinter(output string) (printers.ResourcePrinter, error) {
	if strings.HasPrefix(output, "custom-columns") {
		return get.NewCustomColumnsPrintFlags().ToPrinter(output)
	}
	// As kubectl passes -o: the format and its template in one string.
	flags := genericclioptions.NewPrintFlags("").WithTypeSetter(scheme.New())
	flags.OutputFormat = &output
	return flags.ToPrinter()
}

// printObjects lists the selected NexoProxies and prints them with kubectl's printer for -o: one
// object with NAME, else a List.
func printObjects(ctx context.Context, c client.Client, o *cliopts.Options, name string, sel labels.Selector) error {
	p, err := objectPrinter(o.Output)
	if err != nil {
		return cliopts.Fail(cliopts.ExitCannot, "-o %s: %v", o.Output, err)
	}
	list, _, err := listProxies(ctx, c, o, name, sel)
	if err != nil {
		return err
	}
	// As kubectl prints what the API server returns: unstructured objects, one or a List.
	items := &unstructured.UnstructuredList{}
	items.SetGroupVersionKind(proxyListKind)
	for i := range list.Items {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&list.Items[i])
		if err != nil {
			return err
		}
		items.Items = append(items.Items, unstructured.Unstructured{Object: u})
	}
	var obj runtime.Object = items
	if name != "" {
		if len(items.Items) == 0 {
			return cliopts.Fail(cliopts.ExitFailed, "NexoProxy %s not found", name)
		}
		obj = &items.Items[0]
	}
	if err := p.PrintObj(obj, o.Out); err != nil {
		return cliopts.Fail(cliopts.ExitCannot, "-o %s: %v", o.Output, err)
	}
	return nil
}

// proxyListKind is the list's kind, which printers need set.
var proxyListKind = nexov1alpha1.GroupVersion.WithKind("NexoProxyList")

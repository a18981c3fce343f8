package statuscmd

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// proxyColumns are the table's columns; the priority-1 ones are shown with -o wide only, as
// kubectl get shows them.
var proxyColumns = []metav1.TableColumnDefinition{
	{Name: "Namespace", Type: "string"}, {Name: "Name", Type: "string"}, {Name: "Phase", Type: "string"},
	{Name: "Ready", Type: "string"}, {Name: "Revision", Type: "string"},
	{Name: "Available", Type: "string", Priority: 1, Description: "the graph revision the ready pods serve"},
	{Name: "Previous", Type: "string", Priority: 1, Description: "the revision before it, which a rollback returns to"},
	{Name: "Age", Type: "string"}, {Name: "Message", Type: "string"},
}

// proxyTable is the proxies as a metav1.Table, what cli-runtime's table printer prints.
func proxyTable(proxies []Proxy) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: proxyColumns}
	for _, p := range proxies {
		t.Rows = append(t.Rows, metav1.TableRow{Cells: []any{p.Namespace, p.Name, p.Phase, fmt.Sprintf("%d/%d", p.ReadyReplicas, p.Replicas),
			dash(p.GraphRevision), dash(p.AvailableRevision), dash(p.PreviousRevision), age(p.Created), truncate(p.Message, 100)}})
	}
	return t
}

// printProxyTable prints the proxies with cli-runtime's table printer (kubectl get's alignment,
// -o wide's columns). With colour the phases are painted after the printer aligned the plain
// text, so escapes never shift a column; noHeaders is --watch's line per change.
func printProxyTable(w io.Writer, proxies []Proxy, wide, noHeaders, colour bool) error {
	var buf bytes.Buffer
	if err := printers.NewTablePrinter(printers.PrintOptions{Wide: wide}).PrintObj(proxyTable(proxies), &buf); err != nil {
		return err
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if colour && len(lines) == len(proxies)+1 {
		at := strings.Index(lines[0], "PHASE")
		for i, p := range proxies {
			if l := lines[i+1]; at >= 0 && strings.HasPrefix(l[min(at, len(l)):], p.Phase) {
				lines[i+1] = l[:at] + paint(p.Phase, phaseColour[p.Phase], true) + l[at+len(p.Phase):]
			}
		}
	}
	if noHeaders && len(lines) > 0 {
		lines = lines[1:]
	}
	if len(lines) == 0 {
		return nil
	}
	_, err := io.WriteString(w, strings.Join(lines, "\n")+"\n")
	return err
}

// printConditions prints a proxy's conditions as a table indented under its heading.
func printConditions(w io.Writer, conditions []metav1.Condition) error {
	t := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		{Name: "Type", Type: "string"}, {Name: "Status", Type: "string"}, {Name: "Reason", Type: "string"}, {Name: "Message", Type: "string"}}}
	for _, c := range conditions {
		t.Rows = append(t.Rows, metav1.TableRow{Cells: []any{c.Type, string(c.Status), c.Reason, c.Message}})
	}
	var buf bytes.Buffer
	if err := printers.NewTablePrinter(printers.PrintOptions{}).PrintObj(t, &buf); err != nil {
		return err
	}
	for _, l := range strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n") {
		if _, err := io.WriteString(w, "  "+l+"\n"); err != nil {
			return err
		}
	}
	return nil
}

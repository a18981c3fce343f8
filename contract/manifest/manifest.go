// Package manifest reads Kubernetes manifests the way kubectl does: multi-document YAML or JSON
// (apimachinery's YAML reader, so "---" with comments or CRLF line ends splits correctly), with
// `kind: List` flattened into its items and empty documents skipped.
package manifest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Read returns the objects of every document in r; source names r in errors. A document without
// a kind is an error.
func Read(r io.Reader, source string) ([]*unstructured.Unstructured, error) {
	return read(r, source, false)
}

func read(r io.Reader, source string, skipKindless bool) ([]*unstructured.Unstructured, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(r))
	var out []*unstructured.Unstructured
	for i := 1; ; i++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
		doc = bytes.ReplaceAll(doc, []byte("\r\n"), []byte("\n"))
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		obj := map[string]any{}
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			return nil, fmt.Errorf("%s (document %d): %w", source, i, err)
		}
		if len(obj) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		if u.GetKind() == "" && skipKindless {
			continue
		}
		if u.GetKind() == "" {
			return nil, fmt.Errorf("%s (document %d): no kind: not a Kubernetes object", source, i)
		}
		if strings.HasSuffix(u.GetKind(), "List") && u.IsList() {
			list, err := u.ToList()
			if err != nil {
				return nil, fmt.Errorf("%s (document %d, %s): %w", source, i, u.GetKind(), err)
			}
			for j := range list.Items {
				if list.Items[j].GetKind() == "" {
					return nil, fmt.Errorf("%s (document %d, %s item %d): no kind: not a Kubernetes object", source, i, u.GetKind(), j+1)
				}
				out = append(out, &list.Items[j])
			}
			continue
		}
		out = append(out, u)
	}
}

// stripComments drops comment-only lines (a document of comments is empty).
func stripComments(doc []byte) []byte {
	var b bytes.Buffer
	for _, line := range strings.Split(string(doc), "\n") {
		if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
			b.WriteString(line + "\n")
		}
	}
	return b.Bytes()
}

// Load reads path: "-" for stdin, a file, or every .yaml/.yml/.json file under a folder (where
// documents without a kind, such as Helm values files, are skipped).
func Load(path string, stdin io.Reader) ([]*unstructured.Unstructured, error) {
	if path == "-" {
		return Read(stdin, "stdin")
	}
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return Read(f, path)
	}
	var out []*unstructured.Unstructured
	err = filepath.WalkDir(path, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		switch strings.ToLower(filepath.Ext(p)) {
		case ".yaml", ".yml", ".json":
		default:
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		objs, err := read(f, p, true)
		out = append(out, objs...)
		return err
	})
	return out, err
}

// Package signcmd is `nexoctl sign` and `nexoctl verify`, for GitOps users who manage signed
// Nexo manifests themselves. Both use the operator's signature package.
package signcmd

import (
	"bytes"
	"crypto/ed25519"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/contract/manifest"
	"github.com/nexo-io/nexo-edge/contract/signature"
	"github.com/nexo-io/nexo-edge/nexoctl/cliopts"
)

func readManifests(o *cliopts.Options, file string) ([]*unstructured.Unstructured, error) {
	objs, err := manifest.Load(file, o.In)
	if err != nil {
		return nil, cliopts.Fail(cliopts.ExitCannot, "read %s: %v", file, err)
	}
	for i, u := range objs {
		if u.GroupVersionKind().Group != catalog.Group {
			return nil, cliopts.Fail(cliopts.ExitCannot, "%s object %d is %s %s, not a nexo.io object; only Nexo objects are signed", file, i+1, u.GetKind(), u.GetName())
		}
		if _, ok := catalog.Lookup(u.GetKind()); !ok {
			return nil, cliopts.Fail(cliopts.ExitCannot, "%s object %d: %s is not a Nexo kind", file, i+1, u.GetKind())
		}
		if u.GetNamespace() == "" {
			return nil, cliopts.Fail(cliopts.ExitCannot, "%s object %d (%s %s) has no metadata.namespace; the namespace is part of the signature", file, i+1, u.GetKind(), u.GetName())
		}
	}
	if len(objs) == 0 {
		return nil, cliopts.Fail(cliopts.ExitCannot, "%s holds no manifests", file)
	}
	return objs, nil
}

// NewSignCmd builds `nexoctl sign`.
func NewSignCmd(o *cliopts.Options) *cobra.Command {
	var keyFile, file, audience string
	var revision int64
	cmd := &cobra.Command{
		Use:   "sign --key-file KEY --environment ENV --revision N -f FILE",
		Short: "Sign Nexo manifests as Control-Plane managed (prints the signed YAML)",
		Long: "Sign Nexo manifests for one environment (the audience; only an operator of that environment accepts them)\n" +
			"at a revision: an operator refuses a manifest whose revision is lower than the last one it accepted for the object,\n" +
			"so give every re-signed change a higher revision (a timestamp such as $(date +%s) works).",
		Example: "  nexoctl sign --key-file cp.key --environment 0a1b2c3d4e5f --revision $(date +%s) -f proxy.yaml > proxy.signed.yaml",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			data, err := os.ReadFile(keyFile)
			if err != nil {
				return cliopts.Fail(cliopts.ExitCannot, "read the signing key: %v", err)
			}
			priv, err := signature.ParsePrivateKey(data)
			if err != nil {
				return cliopts.Fail(cliopts.ExitCannot, "%s is not an ed25519 private key in PEM (PKCS#8): %v", keyFile, err)
			}
			objs, err := readManifests(o, file)
			if err != nil {
				return err
			}
			var buf bytes.Buffer
			for _, u := range objs {
				if err := signature.Sign(u, priv, signature.Claims{Audience: audience, Revision: revision}); err != nil {
					return cliopts.Fail(cliopts.ExitCannot, "sign %s %s: %v", u.GetKind(), u.GetName(), err)
				}
				b, err := yaml.Marshal(u.Object)
				if err != nil {
					return err
				}
				buf.WriteString("---\n")
				buf.Write(b)
			}
			_, err = o.Out.Write(buf.Bytes())
			fmt.Fprintf(o.Err, "signed %d objects with key %s\n", len(objs), signature.KeyID(priv.Public().(ed25519.PublicKey)))
			return err
		},
	}
	cmd.Flags().StringVar(&keyFile, "key-file", "", "ed25519 private key, PEM (PKCS#8)")
	cmd.Flags().StringVarP(&file, "filename", "f", "", "manifests to sign; - reads stdin")
	cmd.Flags().StringVar(&audience, "environment", "", "environment id the manifests are for (the signature's audience)")
	cmd.Flags().Int64Var(&revision, "revision", 0, "signature revision, at least 1 and higher than any earlier signature of the same objects")
	_ = cmd.MarkFlagRequired("environment")
	_ = cmd.MarkFlagRequired("revision")
	_ = cmd.MarkFlagRequired("key-file")
	_ = cmd.MarkFlagRequired("filename")
	return cmd
}

// VerifyResult is one object's verdict in `nexoctl verify -o json`.
type VerifyResult struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Valid     bool   `json:"valid"`
	Message   string `json:"message"`
}

// NewVerifyCmd builds `nexoctl verify`.
func NewVerifyCmd(o *cliopts.Options) *cobra.Command {
	var keyFiles []string
	var file, audience string
	cmd := &cobra.Command{
		Use:     "verify --public-key-file PUB --environment ENV -f FILE",
		Short:   "Verify the signatures of Nexo manifests for an environment",
		Example: "  nexoctl verify --public-key-file cp.pub --environment 0a1b2c3d4e5f -f proxy.signed.yaml",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.ValidateOutput(); err != nil {
				return err
			}
			trusted := map[string]ed25519.PublicKey{}
			for _, f := range keyFiles {
				data, err := os.ReadFile(f)
				if err != nil {
					return cliopts.Fail(cliopts.ExitCannot, "read public key: %v", err)
				}
				pub, err := signature.ParsePublicKey(data)
				if err != nil {
					return cliopts.Fail(cliopts.ExitCannot, "%s: %v", f, err)
				}
				trusted[signature.KeyID(pub)] = pub
			}
			objs, err := readManifests(o, file)
			if err != nil {
				return err
			}
			var results []VerifyResult
			failed := 0
			for _, u := range objs {
				r := VerifyResult{Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName(), Valid: true}
				signed, err := signature.Verify(u, trusted, audience)
				r.Message = fmt.Sprintf("signed by trusted key %s for environment %s, revision %d", signed.KeyID, signed.Audience, signed.Revision)
				if err != nil {
					r.Valid, r.Message = false, err.Error()
					failed++
				}
				results = append(results, r)
			}
			if o.Output == cliopts.OutputText {
				for _, r := range results {
					glyph := "✔"
					if !r.Valid {
						glyph = "×"
					}
					fmt.Fprintf(o.Out, "%s %s %s/%s: %s\n", glyph, r.Kind, r.Namespace, r.Name, r.Message)
				}
			} else if err := o.PrintData(map[string]any{"results": results, "failed": failed}); err != nil {
				return err
			}
			if failed > 0 {
				return cliopts.Fail(cliopts.ExitFailed, "%d of %d objects failed verification", failed, len(objs))
			}
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&keyFiles, "public-key-file", nil, "trusted ed25519 public keys (PEM or base64), repeatable")
	cmd.Flags().StringVarP(&file, "filename", "f", "", "manifests to verify; - reads stdin")
	cmd.Flags().StringVar(&audience, "environment", "", "environment id the manifests must be signed for")
	_ = cmd.MarkFlagRequired("environment")
	_ = cmd.MarkFlagRequired("public-key-file")
	_ = cmd.MarkFlagRequired("filename")
	return cmd
}

package testcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// ServiceAccountConfig returns a client config that authenticates as a ServiceAccount, with a
// token from the TokenRequest API (the API server signs it itself, so this works without the
// token controller). Tests run the operator and the Manager with it: the product's own RBAC
// decides what they may do, not system:masters.
func (c *Cluster) ServiceAccountConfig(ctx context.Context, namespace, name string) (*rest.Config, error) {
	return ServiceAccountConfig(ctx, c.Config, namespace, name)
}

// ServiceAccountConfig is Cluster.ServiceAccountConfig for any cluster an admin config reaches
// (the demo on an existing cluster).
func ServiceAccountConfig(ctx context.Context, admin *rest.Config, namespace, name string) (*rest.Config, error) {
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return nil, err
	}
	tok, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(4 * 3600))},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("request a token for ServiceAccount %s/%s: %w", namespace, name, err)
	}
	cfg := rest.AnonymousClientConfig(admin)
	cfg.BearerToken = tok.Status.Token
	cfg.QPS, cfg.Burst = admin.QPS, admin.Burst
	return cfg, nil
}

// UserConfig returns a client config for a plain user (a client certificate signed by the
// cluster's CA) with the given groups and no other rights: a tenant fixture gets its rights from
// the RoleBindings a test creates.
func (c *Cluster) UserConfig(name string, groups ...string) (*rest.Config, error) {
	u, err := c.env.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		return nil, fmt.Errorf("create user %s: %w", name, err)
	}
	cfg := rest.CopyConfig(u.Config())
	cfg.QPS, cfg.Burst = c.Config.QPS, c.Config.Burst
	return cfg, nil
}

// WriteKubeconfig writes a kubeconfig file for cfg (a token or client-certificate config) into
// the cluster's folder, for external processes (the Manager, nexoctl) that run as that identity.
func (c *Cluster) WriteKubeconfig(name string, cfg *rest.Config) (string, error) {
	path := filepath.Join(c.Dir, "kubeconfig-"+name)
	return path, WriteKubeconfig(path, name, cfg)
}

// WriteKubeconfig writes a kubeconfig file at path for cfg (token or client certificate).
func WriteKubeconfig(path, name string, cfg *rest.Config) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["local"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken, ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: "local", AuthInfo: name}
	kc.CurrentContext = name
	raw, err := clientcmd.Write(*kc)
	if err != nil {
		return err
	}
	return os.WriteFile(path, raw, 0o600)
}

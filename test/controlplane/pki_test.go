package controlplane

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

func TestWritePKI(t *testing.T) {
	dir := t.TempDir()
	p, err := writePKI(dir)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(p.servingCert, p.servingKey)
	if err != nil {
		t.Fatalf("load serving pair: %v", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(p.caPEM) {
		t.Fatal("CA PEM not parsed")
	}
	for _, name := range []string{"127.0.0.1", "localhost", "kubernetes.default.svc"} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: name}); err != nil {
			t.Errorf("serving cert does not verify for %s: %v", name, err)
		}
	}
	for _, f := range []string{p.caCert, p.caKey, p.saKey, p.saPub} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if blk, _ := pem.Decode(b); blk == nil {
			t.Errorf("%s: no PEM block", filepath.Base(f))
		}
	}
}

func TestWriteKubeconfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := writeKubeconfig(path, "https://127.0.0.1:1234", []byte("ca"), "tok"); err != nil {
		t.Fatal(err)
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: path}, &clientcmd.ConfigOverrides{})
	raw, err := cc.RawConfig()
	if err != nil {
		t.Fatal(err)
	}
	if raw.CurrentContext != ContextName {
		t.Errorf("current context = %q, want %q", raw.CurrentContext, ContextName)
	}
	ns, _, err := cc.Namespace()
	if err != nil || ns != "default" {
		t.Errorf("namespace = %q, %v; want default", ns, err)
	}
	cfg, err := cc.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://127.0.0.1:1234" || cfg.BearerToken != "tok" || string(cfg.CAData) != "ca" {
		t.Errorf("client config = host %q token %q ca %q", cfg.Host, cfg.BearerToken, cfg.CAData)
	}
}

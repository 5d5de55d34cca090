package controlplane

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki holds the paths of the key material that the control plane needs, all
// inside one directory: a CA, a serving certificate for the API server signed
// by it, and a key pair for signing and verifying service-account tokens.
type pki struct {
	caCert      string // PEM CA certificate (also the kubeconfig's certificate-authority-data)
	caKey       string // PEM CA private key
	servingCert string // PEM serving certificate for 127.0.0.1 / localhost
	servingKey  string // PEM serving private key
	saKey       string // PEM service-account signing key (private)
	saPub       string // PEM service-account verifying key (public)
	caPEM       []byte // contents of caCert
}

// writePKI generates a fresh CA, a serving certificate valid for 127.0.0.1,
// ::1, localhost and the in-cluster names of the kubernetes Service, and a
// service-account key pair, and writes them as PEM files into dir. Every key
// is ECDSA P-256; certificates are valid for 24 h from one minute ago.
// It returns an error when key generation or a file write fails.
func writePKI(dir string) (*pki, error) {
	p := &pki{
		caCert:      filepath.Join(dir, "ca.crt"),
		caKey:       filepath.Join(dir, "ca.key"),
		servingCert: filepath.Join(dir, "apiserver.crt"),
		servingKey:  filepath.Join(dir, "apiserver.key"),
		saKey:       filepath.Join(dir, "sa.key"),
		saPub:       filepath.Join(dir, "sa.pub"),
	}
	notBefore := time.Now().Add(-time.Minute)
	notAfter := notBefore.Add(24 * time.Hour)

	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "drill-test-ca"},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("create CA certificate: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("parse CA certificate: %w", err)
	}

	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate serving key: %w", err)
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default",
			"kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("create serving certificate: %w", err)
	}

	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate service-account key: %w", err)
	}

	p.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	files := []struct {
		path string
		typ  string
		der  func() ([]byte, error)
	}{
		{p.caCert, "CERTIFICATE", func() ([]byte, error) { return caDER, nil }},
		{p.caKey, "EC PRIVATE KEY", func() ([]byte, error) { return x509.MarshalECPrivateKey(caKey) }},
		{p.servingCert, "CERTIFICATE", func() ([]byte, error) { return srvDER, nil }},
		{p.servingKey, "EC PRIVATE KEY", func() ([]byte, error) { return x509.MarshalECPrivateKey(srvKey) }},
		{p.saKey, "EC PRIVATE KEY", func() ([]byte, error) { return x509.MarshalECPrivateKey(saKey) }},
		{p.saPub, "PUBLIC KEY", func() ([]byte, error) { return x509.MarshalPKIXPublicKey(&saKey.PublicKey) }},
	}
	for _, f := range files {
		der, err := f.der()
		if err != nil {
			return nil, fmt.Errorf("encode %s: %w", filepath.Base(f.path), err)
		}
		if err := os.WriteFile(f.path, pem.EncodeToMemory(&pem.Block{Type: f.typ, Bytes: der}), 0o600); err != nil {
			return nil, fmt.Errorf("write %s: %w", filepath.Base(f.path), err)
		}
	}
	return p, nil
}

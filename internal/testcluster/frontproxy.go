package testcluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"

	certutil "k8s.io/client-go/util/cert"
)

// requestHeaderCA writes a CA certificate for the request-header
// authenticator into a folder of its own and returns the file; beside it,
// proxy.crt and proxy.key, the front-proxy-client certificate it signed,
// which the apiserver shows the aggregated APIs it proxies to (virt-api
// refuses a request without a client certificate from this CA).
func requestHeaderCA() (string, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", err
	}
	ca, err := certutil.NewSelfSignedCACert(certutil.Config{CommonName: "front-proxy-ca"}, key)
	if err != nil {
		return "", fmt.Errorf("testcluster: request-header CA: %w", err)
	}
	proxyKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "front-proxy-client"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &proxyKey.PublicKey, key)
	if err != nil {
		return "", fmt.Errorf("testcluster: front-proxy client certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(proxyKey)
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "corral-reqheader-")
	if err != nil {
		return "", err
	}
	files := map[string]*pem.Block{
		"ca.crt":    {Type: "CERTIFICATE", Bytes: ca.Raw},
		"proxy.crt": {Type: "CERTIFICATE", Bytes: der},
		"proxy.key": {Type: "EC PRIVATE KEY", Bytes: keyDER},
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(b), 0o600); err != nil {
			os.RemoveAll(dir)
			return "", err
		}
	}
	return filepath.Join(dir, "ca.crt"), nil
}

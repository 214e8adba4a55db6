package testcluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"sync/atomic"
	"time"
)

// kubeVirtCA is the test KubeVirt's CA, what virt-operator keeps in the
// kubevirt-ca ConfigMap: it signs virt-api's serving certificate, the
// client certificate virt-api shows virt-handler, and the node stand-in's
// virt-handler certificate, with the common names KubeVirt's
// pkg/util/tls checks (kubevirt.io:system:node:virt-handler,
// kubevirt.io:system:client:virt-handler).
type kubeVirtCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

// Common names KubeVirt's mTLS between virt-api and virt-handler checks.
const (
	cnHandlerServer = "kubevirt.io:system:node:virt-handler"
	cnHandlerClient = "kubevirt.io:system:client:virt-handler"
)

var certSerial atomic.Int64

func newKubeVirtCA() (*kubeVirtCA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(certSerial.Add(1)), Subject: pkix.Name{CommonName: "kubevirt.io"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(48 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("testcluster: KubeVirt CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &kubeVirtCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// issue returns a certificate and key (PEM) for cn, good for servers and
// clients, naming ips and names.
func (ca *kubeVirtCA) issue(cn string, ips []net.IP, names []string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(certSerial.Add(1)), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IPAddresses: ips, DNSNames: names,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("testcluster: certificate for %s: %w", cn, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// handlerServerTLS is virt-handler's side of the mTLS: its certificate
// (cnHandlerServer), and a client certificate required that chains to the
// CA for client use and names cnHandlerClient, as virt-handler's
// SetupTLSForVirtHandlerServer checks.
func (ca *kubeVirtCA) handlerServerTLS() (*tls.Config, error) {
	certPEM, keyPEM, err := ca.issue(cnHandlerServer, nil, nil)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	return &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAnyClientCert, MinVersion: tls.VersionTLS12,
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) == 0 {
				return errors.New("no client certificate")
			}
			c, err := x509.ParseCertificate(raw[0])
			if err != nil {
				return err
			}
			if _, err := c.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
				return fmt.Errorf("client certificate: %w", err)
			}
			if c.Subject.CommonName != cnHandlerClient {
				return fmt.Errorf("client certificate names %q, not %q", c.Subject.CommonName, cnHandlerClient)
			}
			return nil
		}}, nil
}

package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// AdminUser is the user the admin token authenticates as; it is in system:masters.
const AdminUser = "metalambda-admin"

// secrets are the credentials a cluster needs, generated once per data directory so
// that a restarted cluster keeps accepting tokens it issued before.
type secrets struct {
	serviceAccountKey string // PEM RSA private key file; also its own public key
	tokenFile         string // kube-apiserver --token-auth-file
	adminToken        string
	// kubeletClient is the client certificate kube-apiserver shows nodes (`kubectl
	// logs`), signed by clientCA, which kube-apiserver publishes (--client-ca-file)
	// so that nodes can verify it.
	kubeletClient clientCert
}

// clientCert is a client certificate, its key and the CA that signed it (PEM files).
type clientCert struct {
	caFile, certFile, keyFile string
}

// KubeletClientUser is the user kube-apiserver's kubelet client certificate names.
const KubeletClientUser = "kube-apiserver-kubelet-client"

func ensureSecrets(dir string) (*secrets, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	s := &secrets{
		serviceAccountKey: filepath.Join(dir, "service-account.key"),
		tokenFile:         filepath.Join(dir, "tokens.csv"),
	}
	if err := ensureFile(s.serviceAccountKey, newRSAKeyPEM); err != nil {
		return nil, fmt.Errorf("service-account key: %w", err)
	}
	if err := ensureFile(s.tokenFile, newTokenFile); err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	s.kubeletClient = clientCert{
		caFile:   filepath.Join(dir, "client-ca.crt"),
		certFile: filepath.Join(dir, "kubelet-client.crt"),
		keyFile:  filepath.Join(dir, "kubelet-client.key"),
	}
	if err := s.kubeletClient.ensure(KubeletClientUser); err != nil {
		return nil, fmt.Errorf("kubelet client certificate: %w", err)
	}
	token, err := readAdminToken(s.tokenFile)
	if err != nil {
		return nil, err
	}
	s.adminToken = token
	return s, nil
}

// ensureFile writes make()'s output to path unless path already exists.
func ensureFile(path string, make func() ([]byte, error)) error {
	_, err := os.Stat(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	data, err := make()
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

func newRSAKeyPEM() ([]byte, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	der := x509.MarshalPKCS1PrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: der}), nil
}

func newTokenFile() ([]byte, error) {
	raw := make([]byte, 24)
	if _, err := rand.Read(raw); err != nil {
		return nil, err
	}
	// token,user,uid,"group1,group2"
	return fmt.Appendf(nil, "%s,%s,%s,\"system:masters\"\n", hex.EncodeToString(raw), AdminUser, AdminUser), nil
}

func readAdminToken(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	for line := range strings.Lines(string(data)) {
		fields := strings.Split(strings.TrimSpace(line), ",")
		if len(fields) >= 2 && fields[1] == AdminUser {
			return fields[0], nil
		}
	}
	return "", fmt.Errorf("%s has no token for %s", path, AdminUser)
}

// ensure writes a new CA and a client certificate for user signed by it unless all
// three files exist. The CA's key is not kept: nothing else is signed by it.
func (c clientCert) ensure(user string) error {
	missing := false
	for _, f := range []string{c.caFile, c.certFile, c.keyFile} {
		if _, err := os.Stat(f); errors.Is(err, fs.ErrNotExist) {
			missing = true
		} else if err != nil {
			return err
		}
	}
	if !missing {
		return nil
	}
	caPEM, certPEM, keyPEM, err := newClientCert(user)
	if err != nil {
		return err
	}
	for f, data := range map[string][]byte{c.caFile: caPEM, c.certFile: certPEM, c.keyFile: keyPEM} {
		if err := os.WriteFile(f, data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// newClientCert makes a CA and a ten-year client certificate for user signed by it.
func newClientCert(user string) (caPEM, certPEM, keyPEM []byte, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	now := time.Now()
	ca := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "metalambda-client-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: user},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     ca.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

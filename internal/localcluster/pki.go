package localcluster

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// AdminUser is the user the admin token authenticates as; it is in system:masters.
const AdminUser = "metalambda-admin"

// secrets are the credentials a cluster needs, generated once per data directory so
// that a restarted cluster keeps accepting tokens it issued before.
type secrets struct {
	serviceAccountKey string // PEM RSA private key file; also its own public key
	tokenFile         string // kube-apiserver --token-auth-file
	adminToken        string
}

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

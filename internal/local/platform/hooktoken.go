package platform

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/metalambda/metalambda/internal/engine/hook"
)

// HookTokenFile is where the platform keeps the bearer token its gateway requires on
// /hooks: generated at first start, readable by its owner alone.
func HookTokenFile(dataDir string) string { return filepath.Join(dataDir, "hook-token") }

// hookToken reads the platform's hook token, generating it on first use. A token file
// that others may read, or that is empty, is an error naming the file.
func hookToken(dataDir string) (string, error) {
	path := HookTokenFile(dataDir)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return newHookToken(path)
	}
	if err != nil {
		return "", fmt.Errorf("hook token: %w", err)
	}
	info, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("hook token: %w", err)
	}
	if info.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("hook token %s is readable by others (mode %v): chmod 600 it, or delete it to have a new one made", path, info.Mode().Perm())
	}
	token := strings.TrimSpace(string(data))
	if token == "" {
		return "", fmt.Errorf("hook token %s is empty: delete it to have a new one made", path)
	}
	return token, nil
}

func newHookToken(path string) (string, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("hook token: %w", err)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", fmt.Errorf("hook token: %w", err)
	}
	token := hex.EncodeToString(raw)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("hook token: %w", err)
	}
	if _, err := f.WriteString(token + "\n"); err != nil {
		f.Close()
		return "", fmt.Errorf("hook token: %w", err)
	}
	return token, f.Close()
}

// newHookHTTP is the engine's HTTP client for hooks: keep-alive connections, many per
// host (the gateway is one host), no client-level timeout (each call has its own).
func newHookHTTP() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = 1000, 100
	return &http.Client{Transport: t, CheckRedirect: hook.CheckRedirect}
}

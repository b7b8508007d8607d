package platform

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHookTokenIsMadeOnceAndKeptPrivate: the first start writes a random token only its
// owner may read; later starts read the same one; a token others may read, or an empty
// one, is refused with the file named.
func TestHookTokenIsMadeOnceAndKeptPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	first, err := hookToken(dir)
	if err != nil || len(first) != 64 {
		t.Fatalf("first start: %q, %v; want 64 hex digits", first, err)
	}
	info, err := os.Stat(HookTokenFile(dir))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v, mode %v; want 0600", err, info.Mode().Perm())
	}
	if again, err := hookToken(dir); err != nil || again != first {
		t.Fatalf("second start: %q, %v; want the first token", again, err)
	}
	if other, _ := hookToken(t.TempDir()); other == first {
		t.Fatalf("two data directories got the same token")
	}
	if err := os.Chmod(HookTokenFile(dir), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := hookToken(dir); err == nil || !strings.Contains(err.Error(), HookTokenFile(dir)) || !strings.Contains(err.Error(), "readable by others") {
		t.Errorf("world-readable token: %v, want an error naming the file", err)
	}
	if err := os.WriteFile(HookTokenFile(dir), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(HookTokenFile(dir), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := hookToken(dir); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("empty token file: %v, want an error", err)
	}
}

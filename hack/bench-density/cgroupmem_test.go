package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCgroupMemoryReadsBothVersions reads the memory and the kernel's part of
// it from a cgroup v1 directory and from a v2 one, whose kernel memory is a
// line of memory.stat among others.
func TestCgroupMemoryReadsBothVersions(t *testing.T) {
	v1 := t.TempDir()
	writeFiles(t, v1, map[string]string{"memory.usage_in_bytes": "1871872\n", "memory.kmem.usage_in_bytes": "323584\n"})
	if usage, kernel, ok := cgroupMemory(v1, false); !ok || usage != 1871872 || kernel != 323584 {
		t.Errorf("v1: %d, %d, %v; want 1871872, 323584, true", usage, kernel, ok)
	}
	v2 := t.TempDir()
	writeFiles(t, v2, map[string]string{
		"memory.current": "2097152\n",
		"memory.stat":    "anon 1572864\nfile 0\nkernel_stack 65536\nkernel 409600\npagetables 98304\n",
	})
	if usage, kernel, ok := cgroupMemory(v2, true); !ok || usage != 2097152 || kernel != 409600 {
		t.Errorf("v2: %d, %d, %v; want 2097152, 409600, true", usage, kernel, ok)
	}
	if _, _, ok := cgroupMemory(t.TempDir(), false); ok {
		t.Error("a directory without the memory files was read")
	}
}

// TestBudgetViewPrintsEachKindAndTheTotal prints a view of two kinds: a row
// each, none for the kind that has no cgroup, and the total.
func TestBudgetViewPrintsEachKindAndTheTotal(t *testing.T) {
	view := budgetView{
		cgroupKinds[0]: {cgroups: 2, usage: 4 << 20, kernel: 1 << 19},
		cgroupKinds[2]: {cgroups: 1, usage: 2 << 20, kernel: 1 << 20},
	}
	var out bytes.Buffer
	view.print(&out, "now")
	text := out.String()
	rows := map[string]bool{}
	for line := range strings.SplitSeq(text, "\n") {
		rows[strings.Join(strings.Fields(line), " ")] = true
	}
	for _, want := range []string{"worker or spare 2 4.0 0.5 2048 256", "script zygote 1 2.0 1.0 2048 1024", "all 3 6.0 1.5"} {
		if !rows[want] {
			t.Errorf("no row %q in\n%s", want, text)
		}
	}
	if strings.Contains(text, cgroupKinds[1]) {
		t.Errorf("a row for %s, which has no cgroup:\n%s", cgroupKinds[1], text)
	}
	out.Reset()
	budgetView(nil).print(&out, "now")
	if !strings.Contains(out.String(), "no cgroups to read") {
		t.Errorf("a view without cgroups printed %q", out.String())
	}
}

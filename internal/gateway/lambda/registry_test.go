package lambda

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRegistry(t *testing.T) {
	reg := NewRegistry(sandboxed(t, Options{Builtins: testBuiltins()}))
	if diff := cmp.Diff([]string{Builtin, JavaScript, Jsonnet, Python}, reg.Names()); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
	tests := []Function{
		{Name: "test/js", Runtime: JavaScript, Source: jsEcho},
		{Name: "test/py", Runtime: Python, Source: pyEcho},
		{Name: "test/jsonnet", Runtime: Jsonnet, Source: jsonnetEcho},
		{Name: "test/builtin", Runtime: Builtin, Source: "echo"},
	}
	for _, fn := range tests {
		t.Run(fn.Runtime, func(t *testing.T) {
			c, err := reg.Compile(fn)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			assertEcho(t, c, "demo")
		})
	}
	want := map[string]PoolStats{JavaScript: {}, Python: {}, Jsonnet: {}}
	got := reg.Stats()
	for name, s := range got {
		got[name] = PoolStats{Idle: s.Idle, Busy: s.Busy}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stats after Close (-want +got):\n%s", diff)
	}
}

func TestRegistryUnknownRuntime(t *testing.T) {
	_, err := NewRegistry(Options{}).Compile(Function{Name: "test/x", Runtime: "cobol"})
	if !errors.Is(err, ErrUnknownRuntime) {
		t.Fatalf("error = %v, want ErrUnknownRuntime", err)
	}
}

func TestInvalidRequest(t *testing.T) {
	reg := NewRegistry(sandboxed(t, Options{Builtins: testBuiltins()}))
	for _, fn := range []Function{
		{Name: "test/js", Runtime: JavaScript, Source: jsEcho},
		{Name: "test/py", Runtime: Python, Source: pyEcho},
		{Name: "test/jsonnet", Runtime: Jsonnet, Source: jsonnetEcho},
		{Name: "test/builtin", Runtime: Builtin, Source: "echo"},
	} {
		c, err := reg.Compile(fn)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Invoke(context.Background(), []byte(`{"parent":`))
		c.Close()
		if !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("%s: error = %v, want ErrInvalidRequest", fn.Runtime, err)
		}
	}
}

func TestInvokeAfterClose(t *testing.T) {
	reg := NewRegistry(sandboxed(t, Options{}))
	for _, fn := range []Function{
		{Name: "test/js", Runtime: JavaScript, Source: jsEcho},
		{Name: "test/py", Runtime: Python, Source: pyEcho},
	} {
		c, err := reg.Compile(fn)
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		c.Close() // idempotent
		if _, err := c.Invoke(context.Background(), echoRequest("x")); !errors.Is(err, ErrClosed) {
			t.Errorf("%s: error = %v, want ErrClosed", fn.Runtime, err)
		}
	}
}

func TestEnvironment(t *testing.T) {
	env := map[string]string{"GREETING": "hello"}
	tests := []Function{
		{Name: "test/js", Runtime: JavaScript, Source: "function sync(r) { return {greeting: process.env.GREETING}; }"},
		{Name: "test/jsonnet", Runtime: Jsonnet, Source: "function(request) {greeting: std.extVar('GREETING')}"},
		{Name: "test/py", Runtime: Python, Source: "import os\ndef sync(r):\n    return {'greeting': os.environ['GREETING']}\n"},
	}
	reg := NewRegistry(sandboxed(t, Options{}))
	for _, fn := range tests {
		t.Run(fn.Runtime, func(t *testing.T) {
			fn.Env = env
			c, err := reg.Compile(fn)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			res, err := invoke(t, c, echoRequest("x"))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(map[string]any{"greeting": "hello"}, decode(t, res.Response)); diff != "" {
				t.Errorf("response (-want +got):\n%s", diff)
			}
		})
	}
}

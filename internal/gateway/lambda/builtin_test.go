package lambda

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

func builtinEcho(_ context.Context, request json.RawMessage) (json.RawMessage, error) {
	var req struct {
		Parent struct {
			Metadata struct{ Name string }
		}
	}
	if err := json.Unmarshal(request, &req); err != nil {
		return nil, err
	}
	return json.Marshal(wantEcho(req.Parent.Metadata.Name))
}

func testBuiltins() Builtins {
	return Builtins{
		"echo": builtinEcho,
		"fail": func(context.Context, json.RawMessage) (json.RawMessage, error) {
			return nil, errors.New("boom")
		},
		"panic": func(context.Context, json.RawMessage) (json.RawMessage, error) { panic("oops") },
		"array": func(context.Context, json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage(`[1]`), nil
		},
		"slow": func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		},
		"stuck": func(context.Context, json.RawMessage) (json.RawMessage, error) {
			time.Sleep(2 * time.Second)
			return json.RawMessage(`{}`), nil
		},
	}
}

func TestBuiltinEcho(t *testing.T) {
	rt := NewBuiltin(Options{Builtins: testBuiltins()})
	tests := []Function{
		{Name: "test/by-source", Runtime: Builtin, Source: " echo\n"},
		{Name: "test/by-handler", Runtime: Builtin, Handler: "echo"},
	}
	for _, fn := range tests {
		t.Run(fn.Name, func(t *testing.T) {
			assertEcho(t, mustCompile(t, rt, fn), "demo")
		})
	}
}

func TestBuiltinUnknown(t *testing.T) {
	_, err := NewBuiltin(Options{Builtins: testBuiltins()}).Compile(Function{Name: "test/unknown", Source: "nope"})
	assertCompileError(t, err, 0, 0, `no builtin function "nope" (known: array, echo, fail, panic, slow, stuck)`)
}

func TestBuiltinFailures(t *testing.T) {
	tests := []struct {
		name     string
		reason   string
		contains string
	}{
		{name: "fail", reason: ReasonException, contains: "boom"},
		{name: "panic", reason: ReasonException, contains: "panic: oops"},
		{name: "array", reason: ReasonBadReturn, contains: "not a JSON object"},
		{name: "slow", reason: ReasonTimeout, contains: "100ms"},
		{name: "stuck", reason: ReasonTimeout, contains: "100ms"},
	}
	rt := NewBuiltin(Options{Builtins: testBuiltins()})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustCompile(t, rt, Function{Name: "test/" + tt.name, Handler: tt.name, Timeout: 100 * time.Millisecond})
			_, err := invoke(t, c, echoRequest("demo"))
			assertInvokeError(t, err, tt.reason, tt.contains)
		})
	}
}

// TestBuiltinSeesFunctionEnv checks that a builtin reads its Function's env from
// its context.
func TestBuiltinSeesFunctionEnv(t *testing.T) {
	rt := NewBuiltin(Options{Builtins: Builtins{"env": func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
		return json.Marshal(map[string]any{"env": FunctionEnv(ctx)})
	}}})
	fn := mustCompile(t, rt, Function{Name: "test/env", Runtime: Builtin, Source: "env", Env: map[string]string{"PIP_INDEX_URL": "http://wheels/simple"}})
	res, err := fn.Invoke(context.Background(), json.RawMessage(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Response) != `{"env":{"PIP_INDEX_URL":"http://wheels/simple"}}` {
		t.Errorf("response %s", res.Response)
	}
	if FunctionEnv(context.Background()) != nil {
		t.Error("FunctionEnv outside a builtin call is not nil")
	}
}

package functions

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/metalambda/metalambda/functions/immortalcontainer"
	"github.com/metalambda/metalambda/functions/pythonlambda"
	"github.com/metalambda/metalambda/internal/gateway/lambda"
	"github.com/metalambda/metalambda/internal/hookapi"
)

// CompositeSync is a CompositeController sync hook written as a pure Go function.
type CompositeSync func(req *hookapi.CompositeRequest) (*hookapi.CompositeResponse, error)

// CustomizeHook is a customize hook written as a pure Go function.
type CustomizeHook func(req *hookapi.CustomizeRequest) (*hookapi.CustomizeResponse, error)

// Builtins returns the builtin functions, by the name a Function's source gives:
// "pythonlambda", "pythonlambda-customize" and "immortalcontainer".
func Builtins() lambda.Builtins {
	return lambda.Builtins{
		"pythonlambda":           pythonLambda,
		"pythonlambda-customize": Customize("pythonlambda-customize", pythonlambda.Customize),
		"immortalcontainer":      Composite("immortalcontainer", immortalcontainer.Sync),
	}
}

// pythonLambda is the pythonlambda sync hook, configured by its Function's env
// (pythonlambda.OptionsFromEnv).
func pythonLambda(ctx context.Context, request json.RawMessage) (json.RawMessage, error) {
	sync := pythonlambda.SyncWith(pythonlambda.OptionsFromEnv(lambda.FunctionEnv(ctx)))
	return Composite("pythonlambda", sync)(ctx, request)
}

// Composite adapts sync to a builtin function: it decodes the CompositeRequest,
// calls sync and encodes its response. Errors name the function.
func Composite(name string, sync CompositeSync) lambda.BuiltinFunc {
	return func(_ context.Context, request json.RawMessage) (json.RawMessage, error) {
		var req hookapi.CompositeRequest
		if err := json.Unmarshal(request, &req); err != nil {
			return nil, fmt.Errorf("%s: decode the CompositeRequest: %w", name, err)
		}
		resp, err := sync(&req)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		body, err := json.Marshal(resp)
		if err != nil {
			return nil, fmt.Errorf("%s: encode the CompositeResponse: %w", name, err)
		}
		return body, nil
	}
}

// Customize adapts a customize hook to a builtin function, as Composite does a sync
// hook.
func Customize(name string, hook CustomizeHook) lambda.BuiltinFunc {
	return func(_ context.Context, request json.RawMessage) (json.RawMessage, error) {
		var req hookapi.CustomizeRequest
		if err := json.Unmarshal(request, &req); err != nil {
			return nil, fmt.Errorf("%s: decode the CustomizeRequest: %w", name, err)
		}
		resp, err := hook(&req)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		body, err := json.Marshal(resp)
		if err != nil {
			return nil, fmt.Errorf("%s: encode the CustomizeResponse: %w", name, err)
		}
		return body, nil
	}
}

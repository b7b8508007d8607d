package gateway

import (
	"errors"
	"fmt"

	"github.com/metalambda/metalambda/internal/gateway/lambda"
)

// ErrNetworkNotAllowed is the error of a Function that asks for the host's network
// (spec.network) on a gateway that does not allow it.
var ErrNetworkNotAllowed = errors.New("spec.network asks for the host's network, which this gateway does not allow (it was started without --allow-function-network)")

// networkPolicy compiles functions, refusing those that ask for the host's
// network unless allow is set.
type networkPolicy struct {
	compiler
	allow bool
}

// check refuses fn when it asks for network that the gateway does not allow.
func (p networkPolicy) check(fn lambda.Function) error {
	if fn.Network && !p.allow {
		return fmt.Errorf("function %s: %w", fn.Name, ErrNetworkNotAllowed)
	}
	return nil
}

// Compile compiles fn once check allows it.
func (p networkPolicy) Compile(fn lambda.Function) (lambda.Compiled, error) {
	if err := p.check(fn); err != nil {
		return nil, err
	}
	return p.compiler.Compile(fn)
}

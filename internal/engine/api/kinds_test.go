package api

import "github.com/metalambda/metalambda/internal/engineapi"

// The kinds of controller objects, named as the engine names them.
const (
	CompositeKind = engineapi.KindComposite
	DecoratorKind = engineapi.KindDecorator
)

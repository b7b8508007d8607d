// Package defaults is how a component refuses options that did not start from its
// Defaults(): the constructor names the first option without a value, instead of
// filling it in behind the caller's back.
package defaults

import "fmt"

// Option is an option that Defaults fills in, and whether it holds a value.
type Option struct {
	Name string
	Set  bool
}

// Check names the first option of component that is not set: "<component> option
// <Name> must be <want> (start the options from <component>.Defaults())".
func Check(component, want string, options ...Option) error {
	for _, o := range options {
		if !o.Set {
			return fmt.Errorf("%s option %s must be %s (start the options from %s.Defaults())", component, o.Name, want, component)
		}
	}
	return nil
}

// Package functions owns the builtin hook functions compiled into the gateway: the
// sync hooks of the reference operators (pythonlambda, immortalcontainer), adapted to
// runtime.BuiltinFunc.
package functions

// Package operators holds the reference operators' manifests (operators/<name>/:
// operator.yaml, sample.yaml, README.md, test.sh); their hooks live in functions/.
// The package's tests apply the very manifests shipped here to a real control plane
// with the engine and the gateway running.
package operators

import "embed"

// Manifests holds every operator's operator.yaml, for the local platform to install.
//
//go:embed */operator.yaml
var Manifests embed.FS

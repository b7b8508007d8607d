// Package images holds the Dockerfiles of the engine and the gateway, and a test that
// keeps them in step with cmd/: each Dockerfile's build command, run here, builds a
// static binary of an existing command that reports the version it was given.
package images

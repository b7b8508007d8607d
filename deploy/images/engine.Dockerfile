# syntax=docker/dockerfile:1
# The engine: a static binary on distroless, running as a non-root user.
#
#   make images            # or:
#   docker build -f deploy/images/engine.Dockerfile --build-arg VERSION=$(git describe --tags --always) -t ghcr.io/metalambda/engine:$(git describe --tags --always) .
ARG GO_VERSION=1.26

FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=devel
ARG TARGETOS=linux
ARG TARGETARCH
RUN CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} go build -trimpath -buildvcs=false -ldflags "-s -w -X github.com/metalambda/metalambda/internal/version.version=${VERSION}" -o /out/engine ./cmd/engine

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/engine /usr/bin/engine
# Also under upstream's path, so manifests that run /usr/bin/metacontroller work unchanged.
COPY --from=build /out/engine /usr/bin/metacontroller
USER 65532:65532
ENTRYPOINT ["/usr/bin/engine"]

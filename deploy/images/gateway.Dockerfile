# syntax=docker/dockerfile:1
# The gateway: a static binary with what its runtimes and its sandbox need (CPython 3,
# bubblewrap, and metalambda-launcher, metalambda-worker-javascript and
# metalambda-worker-jsonnet beside it, from which its sandboxed workers start),
# running as a non-root user.
#
#   make images            # or:
#   docker build -f deploy/images/gateway.Dockerfile --build-arg VERSION=$(git describe --tags --always) -t ghcr.io/metalambda/gateway:$(git describe --tags --always) .
ARG GO_VERSION=1.26

FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=devel
ARG TARGETOS=linux
ARG TARGETARCH
# Each runtime's worker executable is built without the other runtime, whose
# packages it would otherwise initialize at every worker's start.
RUN CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} go build -trimpath -buildvcs=false -ldflags "-s -w -X github.com/metalambda/metalambda/internal/version.version=${VERSION}" -o /out/ ./cmd/gateway ./cmd/metalambda-launcher \
 && CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} go build -trimpath -buildvcs=false -tags nojsonnet -ldflags "-s -w -X github.com/metalambda/metalambda/internal/version.version=${VERSION}" -o /out/metalambda-worker-javascript ./cmd/metalambda-worker \
 && CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} go build -trimpath -buildvcs=false -tags nojavascript -ldflags "-s -w -X github.com/metalambda/metalambda/internal/version.version=${VERSION}" -o /out/metalambda-worker-jsonnet ./cmd/metalambda-worker

FROM debian:bookworm-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 bubblewrap \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/gateway /out/metalambda-launcher /out/metalambda-worker-javascript /out/metalambda-worker-jsonnet /usr/bin/
USER 65532:65532
ENTRYPOINT ["/usr/bin/gateway"]

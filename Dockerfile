# syntax=docker/dockerfile:1

# The worker's image: `consumer run` by default; `docker run IMAGE migrate`
# (or demo, help) runs another command. Build with `docker build -t
# paycallback/consumer .` or through docker-compose.yml.

# The builder's Go must be at least go.mod's `go` line (golang images set
# GOTOOLCHAIN=local, so an older one fails instead of downloading).
ARG GO_VERSION=1.26

FROM golang:${GO_VERSION} AS build
WORKDIR /src
# Dependencies first, so a source change does not download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download
COPY . .
# The context holds no .git, so the version and revision come in as build
# arguments: docker build --build-arg VERSION=$(git describe --tags --always)
# --build-arg REVISION=$(git rev-parse HEAD) .
ARG VERSION=unknown
ARG REVISION=unknown
# Pure Go (the embedded database is modernc.org/sqlite), so the binary is
# static and runs on distroless/static.
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w \
      -X github.com/paycallback/paycallback/internal/buildinfo.version=${VERSION} \
      -X github.com/paycallback/paycallback/internal/buildinfo.revision=${REVISION}" \
      -o /out/consumer ./cmd/consumer

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/consumer /consumer
# 65532 is distroless's "nonroot"; numeric so Kubernetes' runAsNonRoot can
# verify it without a passwd lookup.
USER 65532:65532
# PAYCB_ADMIN_ADDR's default: /metrics, /healthz, /readyz.
EXPOSE 9464
ENTRYPOINT ["/consumer"]
CMD ["run"]

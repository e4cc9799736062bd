# syntax=docker/dockerfile:1
#
# toolgate's one binary in a small, non-root image. `docker compose up --build`
# builds it for the toolgate-worker service; on its own:
#
#   docker build -t toolgate .
#   docker run --rm --network host -v toolgate-data:/data toolgate   # a worker for 127.0.0.1:7233
#
# The builder's Go version is go.mod's `go` line (deploy/compose_test.go checks
# that they match). modernc.org/sqlite is pure Go, so the binary is static
# (CGO_ENABLED=0) and runs on distroless/static. .ci/run runs the `go build`
# line below natively (and deploy/static_binary_test.go checks the binary), so
# it cannot drift from a build that works. No build tags: fault injection
# (-tags toolgate_fault) is for the end-to-end suite only.

FROM golang:1.26.8-bookworm AS build
WORKDIR /src
ENV GOTOOLCHAIN=local
# Modules first: this layer is reused until go.mod or go.sum change.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/toolgate ./cmd/toolgate
# The data directory, owned by distroless's nonroot user (65532): a new named
# volume mounted at /data starts as a copy of it, ownership included.
RUN mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/toolgate /toolgate
COPY --from=build --chown=65532:65532 /out/data /data
# The demo desk's SQLite file (desk.db) lives here.
VOLUME ["/data"]
USER 65532:65532
ENTRYPOINT ["/toolgate"]
CMD ["worker", "--data", "/data"]

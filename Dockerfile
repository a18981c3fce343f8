# Images of the three binaries: a static Go build on distroless, running as a non-root UID with
# no shell. No container runtime is available where this repository is developed, so this file
# is kept deliberately small and is not built in CI.
#
#   docker build --build-arg BINARY=operator -t ghcr.io/nexo-io/nexo-operator:0.2.0 .
#   docker build --build-arg BINARY=manager  -t ghcr.io/nexo-io/nexo-manager:0.2.0 .
#   docker build --build-arg BINARY=nexoctl  -t ghcr.io/nexo-io/nexoctl:0.2.0 .
#
# BINARY names a directory under cmd/ (manager and nexoctl land with their issues).
ARG BINARY=operator

FROM golang:1.26 AS build
ARG BINARY
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags=-s -o /out/app ./cmd/${BINARY}

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/app /app
# Numeric, so the restricted Pod Security Standard can verify runAsNonRoot; the pod specs set
# no runAsUser, so OpenShift's restricted-v2 may pick another non-root UID.
USER 65532:65532
ENTRYPOINT ["/app"]

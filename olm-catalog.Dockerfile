# File-based catalog image for the nexo-operator package (OLM / OpenShift OperatorHub).
# Build: docker build -f olm-catalog.Dockerfile -t ghcr.io/nexo-io/nexo-operator-catalog:latest .
FROM quay.io/operator-framework/opm:v1.47.0
ENTRYPOINT ["/bin/opm"]
CMD ["serve", "/configs", "--cache-dir=/tmp/cache"]
COPY olm/catalog /configs
RUN ["/bin/opm", "serve", "/configs", "--cache-dir=/tmp/cache", "--cache-only"]
LABEL operators.operatorframework.io.index.configs.v1=/configs

# A self-serving catalog image (opm included) for an OLM without grpcPodConfig.extractContent.
# It is not released: the released catalog image holds /configs only and is built by
# hack/release (docs/release.md, "The catalog image"). Build it yourself and pin it by digest:
#   docker build -f olm-catalog.Dockerfile -t registry.internal.example/nexo/nexo-operator-catalog-opm:v0.2.0 .
FROM quay.io/operator-framework/opm:v1.47.0
ENTRYPOINT ["/bin/opm"]
CMD ["serve", "/configs", "--cache-dir=/tmp/cache"]
COPY olm/catalog /configs
RUN ["/bin/opm", "serve", "/configs", "--cache-dir=/tmp/cache", "--cache-only"]
LABEL operators.operatorframework.io.index.configs.v1=/configs

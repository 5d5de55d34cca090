# drill-traefik:<version>: Traefik built from its Go module at a pinned
# version by build/traefik.sh (static, stripped), FROM scratch. Built by
# `make compose-images` from a context holding the binary as ./traefik.
FROM scratch
COPY traefik /traefik
ENTRYPOINT ["/traefik"]

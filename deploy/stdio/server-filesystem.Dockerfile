# A legacy stdio MCP server (@modelcontextprotocol/server-filesystem) and mrtr-gateway in one
# image: the gateway spawns the server, one process per pooled session, answers the server's
# start-up roots/list from upstream.roots, and serves MCP 2026-07-28 on 8080 (admin: 9090).
# Build the gateway image first, then, from the repository root:
#
#   docker build -t mrtr-gateway:0.1.0 .
#   docker build -f deploy/stdio/server-filesystem.Dockerfile \
#     -t mrtr-gateway-server-filesystem:0.1.0 deploy/stdio
#   docker run --rm -p 8080:8080 -p 9090:9090 --read-only --tmpfs /tmp \
#     -v "$PWD:/srv/data:ro" mrtr-gateway-server-filesystem:0.1.0

ARG GATEWAY_IMAGE=mrtr-gateway:0.1.0
ARG NODE_IMAGE=docker.io/library/node:20-bookworm-slim

FROM ${GATEWAY_IMAGE} AS gateway

FROM ${NODE_IMAGE}
WORKDIR /opt/mcp
# Installed from its lock file, not fetched by npx at each start: the container needs no
# registry access at run time and a read-only root suffices.
COPY server-filesystem/package.json server-filesystem/package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund --loglevel=error \
    && npm cache clean --force \
    && test -x node_modules/.bin/mcp-server-filesystem
COPY --from=gateway /usr/local/bin/mrtr-gateway /usr/local/bin/mrtr-gateway
# The command, the folder it serves and the roots its start-up roots/list is answered with.
COPY server-filesystem/gateway.toml /etc/mrtr-gateway/gateway.toml
WORKDIR /srv/data
USER 65532:65532
ENV HOME=/tmp \
    NODE_ENV=production \
    PATH=/opt/mcp/node_modules/.bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    MRTR_GATEWAY__FRONT__LISTEN=0.0.0.0:8080 \
    MRTR_GATEWAY__ADMIN__LISTEN=0.0.0.0:9090 \
    MRTR_GATEWAY__LOG__FORMAT=json
EXPOSE 8080 9090
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
    CMD ["/usr/local/bin/mrtr-gateway", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/mrtr-gateway"]
CMD ["--config", "/etc/mrtr-gateway/gateway.toml"]

# A legacy stdio MCP server (mcp-server-git) and mrtr-gateway in one image: the gateway spawns
# the server, one process per pooled session, and serves MCP 2026-07-28 on 8080 (admin: 9090).
# Build the gateway image first, then, from the repository root:
#
#   docker build -t mrtr-gateway:0.1.0 .
#   docker build -f deploy/stdio/server-git.Dockerfile -t mrtr-gateway-server-git:0.1.0 deploy/stdio
#   docker run --rm -p 8080:8080 -p 9090:9090 --read-only --tmpfs /tmp \
#     -v "$PWD:/srv/repo:ro" mrtr-gateway-server-git:0.1.0
#
# The same three steps fit any stdio server: install it on its own runtime's image, copy the
# gateway binary in, and name the server's command in --upstream-command (or upstream.command).

ARG GATEWAY_IMAGE=mrtr-gateway:0.1.0
ARG PYTHON_IMAGE=docker.io/library/python:3.11-slim-bookworm

FROM ${GATEWAY_IMAGE} AS gateway

FROM ${PYTHON_IMAGE}
# mcp-server-git drives the git command line.
RUN apt-get update \
    && apt-get install -y --no-install-recommends git \
    && rm -rf /var/lib/apt/lists/*
COPY requirements-server-git.txt /opt/mcp/requirements.txt
RUN python3 -m venv /opt/mcp \
    && /opt/mcp/bin/pip install --no-cache-dir --no-deps --only-binary=:all: -r /opt/mcp/requirements.txt \
    && /opt/mcp/bin/python -c 'import importlib.metadata as m; assert m.version("mcp-server-git") == "2026.8.18"'
# The gateway is a static-enough binary for any glibc image (Debian 12 or newer).
COPY --from=gateway /usr/local/bin/mrtr-gateway /usr/local/bin/mrtr-gateway
# A repository mounted from elsewhere belongs to another uid: let git read it.
RUN git config --system --add safe.directory '*'
USER 65532:65532
# HOME on /tmp: the only writable place under a read-only root (mount a tmpfs there).
ENV HOME=/tmp \
    PATH=/opt/mcp/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    MRTR_GATEWAY__FRONT__LISTEN=0.0.0.0:8080 \
    MRTR_GATEWAY__ADMIN__LISTEN=0.0.0.0:9090 \
    MRTR_GATEWAY__LOG__FORMAT=json
EXPOSE 8080 9090
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
    CMD ["/usr/local/bin/mrtr-gateway", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/mrtr-gateway"]
CMD ["--upstream-command", "mcp-server-git --repository /srv/repo"]

# bicameral in a container: `docker compose up -d` (compose.yaml), or build with `docker build -t bicameral .`
# Build arguments: EXTRAS (local,matrix; add voice for offline transcription, about 440 MB more), CHROMIUM=1 for
# render_html, render_latex and the browser (about 300 MB more).
ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS builder
ARG EXTRAS=local,matrix
RUN apt-get update \
 && apt-get install -y --no-install-recommends build-essential cmake \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
COPY deploy/build-venv ./deploy/build-venv
RUN BICAMERAL_EXTRAS="$EXTRAS" BICAMERAL_WHEELS=/tmp/wheels deploy/build-venv /opt/bicameral \
 && find /opt/bicameral -name __pycache__ -prune -exec rm -rf {} +

FROM ${PYTHON_IMAGE}
ARG CHROMIUM=0
# bubblewrap for the `run` tool's sandbox (setpriv, from util-linux, is in the base image already); git for the history
# of the owner's own commands (<data>/commands)
RUN apt-get update \
 && apt-get install -y --no-install-recommends bubblewrap git \
 && if [ "$CHROMIUM" = 1 ]; then apt-get install -y --no-install-recommends chromium fonts-liberation; fi \
 && rm -rf /var/lib/apt/lists/*
RUN useradd --system --uid 10001 --user-group --home-dir /data --no-create-home --shell /usr/sbin/nologin bicameral \
 && mkdir -p /data /backups /config \
 && chown bicameral:bicameral /data /backups
COPY --from=builder /opt/bicameral /opt/bicameral
ENV PATH=/opt/bicameral/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    HOME=/data \
    BICAMERAL_DATA_DIR=/data \
    BICAMERAL_BACKUP_DIR=/backups
USER bicameral
# bicameral.toml and .env are read from the working directory: mount them into /config (read-only is enough)
WORKDIR /config
VOLUME ["/data", "/backups"]
# Healthy while the assistant holds its data dir (the lock every running instance takes).
HEALTHCHECK --interval=30s --timeout=10s --start-period=60s --retries=3 CMD ["bicameral", "doctor", "--live"]
ENTRYPOINT ["bicameral"]
CMD ["run"]

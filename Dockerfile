# rock-ts: the R execution service and network catalogue, one port (8085), data in /data.
#
#   docker build -t rock-ts .                       # on a machine that can pull node:20-bookworm-slim
#   test/docker/build-base.sh && \
#   docker build --build-arg BASE=rock-ts-base:node20-bookworm -t rock-ts .   # without a registry
#
# Runs as root inside the container, with every capability dropped but the six that put each R session
# under a uid of its own: SETUID SETGID KILL CHOWN DAC_OVERRIDE FOWNER (see compose.yaml and
# docs/security.md, "Why root in the container, and which capabilities"); a start lacking one of them is
# refused, naming it. SYS_ADMIN and NET_ADMIN (the container's own namespaces) and forwarding
# (net.ipv4.ip_forward=1) give sessions a file system and a network of their own (r.sessionNetwork
# restricted); without them the start warns and sessions keep the container's. Without root the service cannot
# isolate sessions, and ROCK_R_ISOLATION=required below makes it refuse to start rather than run them
# unisolated.

# Any Debian bookworm with Node 20+ in /usr/local/bin: by default the official slim image from Docker
# Hub; where no registry can be reached, the stand-in test/docker/build-base.sh builds with debootstrap
# (debian:bookworm-slim's layout and dpkg excludes, this host's Node and npm), given as
# --build-arg BASE=rock-ts-base:node20-bookworm (compose: ROCK_BASE).
ARG BASE=node:20-bookworm-slim

# ---- CRAN package `unix` (setuid/setgid and rlimits for sessions): compiled here, with R's headers
FROM ${BASE} AS unix-build
ARG CRAN=https://cloud.r-project.org
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends r-base-dev ca-certificates \
 && rm -rf /var/lib/apt/lists/*
RUN mkdir -p /opt/rlib \
 && Rscript -e "install.packages('unix', lib = '/opt/rlib', repos = '${CRAN}')" \
 && Rscript -e "library(unix, lib.loc = '/opt/rlib'); cat('unix', format(packageVersion('unix', lib.loc = '/opt/rlib')), '\n')"
# rocksandbox (this repository's, C): sessions' private /tmp and network namespaces where the container
# is given CAP_SYS_ADMIN.
COPY src/r/sandbox /tmp/rocksandbox
RUN R CMD INSTALL -l /opt/rlib /tmp/rocksandbox && rm -rf /tmp/rocksandbox

# ---- Node dependencies (production only: the server runs compiled, see the build stage)
FROM ${BASE} AS node-deps
# CAs of the base's /usr/local/share/ca-certificates (a proxy's, see test/docker/build-base.sh) count too.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/*
ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt
WORKDIR /app
COPY package.json package-lock.json ./
# `npm ci` refuses this lock file (see .ci/run: it cannot list @bufbuild/buf's macOS/Windows builds);
# `npm install` installs the locked versions all the same.
# --ignore-scripts: the postinstall (rock-ts setup) provides R packages, done in the stages with R.
RUN npm install --omit=dev --ignore-scripts --no-audit --no-fund \
 && npm cache clean --force

# ---- the compiled program: TypeScript compiled into dist/ (one JavaScript file and a source map per
# source file), with the development dependencies, which stay in this stage
FROM node-deps AS build
RUN npm install --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY gen ./gen
COPY src ./src
RUN npm run build

# ---- runtime
FROM ${BASE}
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      r-base-core r-cran-jsonlite tini ca-certificates nftables iproute2 \
      # What Rock's clients run in their sessions: Armadillo installs with remotes::install_local and
      # ends a busy session with ps (docs/compatibility.md).
      r-cran-remotes r-cran-ps \
 && rm -rf /var/lib/apt/lists/*
COPY --from=unix-build /opt/rlib/unix /usr/local/lib/R/site-library/unix
COPY --from=unix-build /opt/rlib/rocksandbox /usr/local/lib/R/site-library/rocksandbox
RUN Rscript -e "library(unix); library(jsonlite)"

WORKDIR /app
COPY --from=node-deps /app/node_modules ./node_modules
COPY package.json package-lock.json tsconfig.json ./
COPY proto ./proto
COPY gen ./gen
# The R scripts, the sandbox's sources and the bin shim are read from src/ at run time.
COPY src ./src
COPY --from=build /app/dist ./dist

ENV NODE_ENV=production \
    NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt \
    LANG=C.UTF-8 \
    ROCK_DATA_DIR=/data \
    ROCK_PORT=8085 \
    ROCK_R_ISOLATION=required
RUN mkdir -p /data && chmod 0711 /data
VOLUME /data
EXPOSE 8085

# tini reaps what ended sessions leave behind; -s keeps it working under `docker run --init` / compose
# `init: true` too. Signals go to Node only (no -g): Node drains, then stops R itself.
ENTRYPOINT ["/usr/bin/tini", "-s", "--", "node", "/app/src/cli/bin.js"]
CMD []

# SIGTERM drains (server.drainSeconds, 30 s): give `docker stop -t 45` / compose stop_grace_period: 45s.
STOPSIGNAL SIGTERM
# /_check needs no credentials and answers 500 once a drain begins. HTTPS when ROCK_TLS_CERT is set.
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
  CMD ["node", "-e", "const t=!!process.env.ROCK_TLS_CERT;require(t?'https':'http').get({host:'127.0.0.1',port:process.env.ROCK_PORT||8085,path:'/_check',rejectUnauthorized:false,timeout:4000},r=>process.exit(r.statusCode===200?0:1)).on('error',()=>process.exit(1)).on('timeout',()=>process.exit(1))"]

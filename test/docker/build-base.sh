#!/usr/bin/env bash
# Builds a local stand-in for node:20-bookworm-slim, for machines that cannot pull base images from a
# registry but can reach Debian's mirror: debootstrap a minimal Debian bookworm, make it slim as
# debian:bookworm-slim is, copy this host's Node 20 (and its npm) where the official image has them, and
# `docker import` the result as $ROCK_BASE_TAG.
#
#   test/docker/build-base.sh                 # builds rock-ts-base:node20-bookworm unless it exists
#   ROCK_BASE_REBUILD=1 test/docker/build-base.sh
#   docker build --build-arg BASE=rock-ts-base:node20-bookworm -t rock-ts .
#
# Needs root, debootstrap (Debian package), a running Docker engine and Node 20 on the host whose binary
# links only to glibc/libstdc++ (as nodesource's and nodejs.org's builds do: checked with ldd below).
set -euo pipefail

TAG="${ROCK_BASE_TAG:-rock-ts-base:node20-bookworm}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
WORK="${ROCK_BASE_WORKDIR:-/var/tmp/rock-ts-base}"

if [ -z "${ROCK_BASE_REBUILD:-}" ] && docker image inspect "$TAG" >/dev/null 2>&1; then
  echo "base image $TAG exists (ROCK_BASE_REBUILD=1 rebuilds it)"
  exit 0
fi

command -v debootstrap >/dev/null || { echo "build-base: debootstrap is missing (apt-get install debootstrap)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "build-base: debootstrap needs root" >&2; exit 1; }
NODE="$(readlink -f "$(command -v node)")"
case "$("$NODE" --version)" in v2[0-9].*) ;; *) echo "build-base: host node $("$NODE" --version) is not 20+" >&2; exit 1 ;; esac
# Node must not link to anything outside what a minimal bookworm has (libc, libstdc++, libgcc_s, libm).
if ldd "$NODE" | grep -v -E 'linux-vdso|ld-linux|lib(c|dl|m|pthread|rt|stdc\+\+|gcc_s)\.so' | grep -q '=>'; then
  echo "build-base: $NODE links to libraries a minimal Debian lacks:" >&2; ldd "$NODE" >&2; exit 1
fi
NPM_DIR="$(dirname "$(dirname "$(readlink -f "$(command -v npm)")")")"   # …/node_modules/npm

ROOTFS="$WORK/rootfs"
if [ ! -x "$ROOTFS/usr/bin/apt-get" ] || [ -n "${ROCK_BASE_REBUILD:-}" ]; then
  rm -rf "$ROOTFS"
  mkdir -p "$WORK"
  echo "debootstrap bookworm into $ROOTFS (about a minute)"
  debootstrap --variant=minbase bookworm "$ROOTFS" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 ||
    { tail -20 "$WORK/debootstrap.log" >&2; exit 1; }
fi

# The same sources as Debian's official images: main, updates and security.
rm -f "$ROOTFS/etc/apt/sources.list"
cat >"$ROOTFS/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $MIRROR
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: ${MIRROR%/debian}/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
rm -rf "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/var/cache/apt/archives/*.deb

# What makes debian:bookworm-slim "slim" (debuerreotype's minimizing config and slimify), so that the
# Dockerfile meets here what it meets on node:20-bookworm-slim: no services started by apt, apt's caches
# cleaned after each install, no translations, and no docs, man pages or locales (kept out by dpkg too).
printf '#!/bin/sh\nexit 101\n' >"$ROOTFS/usr/sbin/policy-rc.d" && chmod 0755 "$ROOTFS/usr/sbin/policy-rc.d"
echo force-unsafe-io >"$ROOTFS/etc/dpkg/dpkg.cfg.d/docker-apt-speedup"
echo 'Apt::AutoRemove::SuggestsImportant "false";' >"$ROOTFS/etc/apt/apt.conf.d/docker-autoremove-suggests"
CLEAN='"rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true";'
printf 'DPkg::Post-Invoke { %s };\nAPT::Update::Post-Invoke { %s };\nDir::Cache::pkgcache "";\nDir::Cache::srcpkgcache "";\n' \
  "$CLEAN" "$CLEAN" >"$ROOTFS/etc/apt/apt.conf.d/docker-clean"
echo 'Acquire::GzipIndexes "true";' >"$ROOTFS/etc/apt/apt.conf.d/docker-gzip-indexes"
echo 'Acquire::Languages "none";' >"$ROOTFS/etc/apt/apt.conf.d/docker-no-languages"
SLIM_EXCLUDES="/usr/share/doc /usr/share/groff /usr/share/info /usr/share/linda /usr/share/lintian/overrides /usr/share/locale /usr/share/man"
{
  echo '# the "slim" variant of the Debian base image (as debuerreotype-slimify writes it)'
  for d in $SLIM_EXCLUDES; do echo "path-exclude $d/*"; done
  for i in '/usr/share/doc/*/copyright' /usr/share/locale/locale.alias /usr/share/locale/languages \
           /usr/share/locale/all_languages '/usr/share/locale/currency/*' '/usr/share/locale/l10n/*'; do
    echo "path-include $i"
  done
} >"$ROOTFS/etc/dpkg/dpkg.cfg.d/docker"
# Inside the new root, where its absolute symlinks point.
for d in $SLIM_EXCLUDES; do
  [ -d "$ROOTFS$d" ] || continue
  chroot "$ROOTFS" find "$d" -depth -mindepth 1 -not \( -type d -o -type l \) \
    -not -path '/usr/share/doc/*/copyright' -not -path /usr/share/locale/locale.alias -delete
  chroot "$ROOTFS" find "$d" -depth -mindepth 1 \( -xtype l -o -type d -empty \) -delete
done

# This host's own CAs (/usr/local/share/ca-certificates: a TLS-intercepting egress proxy's, a company's),
# so that CRAN and the npm registry verify inside the build as they do on the host. The Dockerfile's
# `apt-get install ca-certificates` adds them to /etc/ssl/certs/ca-certificates.crt, which R (libcurl)
# and, through NODE_EXTRA_CA_CERTS, npm use.
mkdir -p "$ROOTFS/usr/local/share/ca-certificates"
if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then
  cp /usr/local/share/ca-certificates/*.crt "$ROOTFS/usr/local/share/ca-certificates/"
  echo "host CAs copied into the base: $(cd /usr/local/share/ca-certificates && echo *.crt)"
fi

# Node and npm where the official node image has them.
install -D -m 0755 "$NODE" "$ROOTFS/usr/local/bin/node"
rm -rf "$ROOTFS/usr/local/lib/node_modules/npm"
mkdir -p "$ROOTFS/usr/local/lib/node_modules"
cp -a "$NPM_DIR" "$ROOTFS/usr/local/lib/node_modules/npm"
ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$ROOTFS/usr/local/bin/npm"
ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$ROOTFS/usr/local/bin/npx"
ln -sf node "$ROOTFS/usr/local/bin/nodejs"
chroot "$ROOTFS" /usr/local/bin/node --version >/dev/null   # runs inside the new root
# The official image's user `node` (1000:1000), so that uid/gid 1000 are taken here as there.
chroot "$ROOTFS" sh -c 'getent passwd node >/dev/null || { groupadd --gid 1000 node && useradd --uid 1000 --gid node --shell /bin/bash --create-home node; }'

echo "importing $ROOTFS as $TAG"
tar -C "$ROOTFS" --numeric-owner -c . | docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change "ENV NODE_VERSION=$("$NODE" --version | tr -d v)" \
  --change 'CMD ["node"]' \
  - "$TAG" >/dev/null
docker image ls "$TAG"

#!/usr/bin/env bash
# Prepare, on a machine WITH network access, everything an offline GPU machine needs to run
# scripts/gpu-check.sh: Python 3.12 wheels of r2bench's missing dependencies, R-2CCL and
# nccl-tests as git bundles (the pinned commits, so `r2bench setup` fetches them as it would from
# GitHub) and a copy of this r2bench checkout.
#
#   scripts/gpu-prepare.sh [OUT_DIR]        (default: .gpu, ignored by git)
#
# Then copy OUT_DIR to the GPU machine and run `bash OUT_DIR/r2bench/scripts/gpu-check.sh OUT_DIR`
# there (docs/gpu.md). Environment:
#   R2CCL_GIT / R2CCL_REF         R-2CCL repository and commit (default: the pinned one)
#   NCCL_TESTS_GIT / NCCL_TESTS_REF  nccl-tests repository and tag (default v2.19.6)
#   NCCL_GIT / NCCL_REF           NVIDIA NCCL and the tag the vanilla recipe builds (v2.23.4-1)
#   PYTHON_VERSION                Python of the GPU machine (default 3.12)
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
# Absolute: the bundles are written from inside their clones (git -C).
out=$(mkdir -p "${1:-$here/.gpu}" && cd "${1:-$here/.gpu}" && pwd)
R2CCL_GIT=${R2CCL_GIT:-https://github.com/r2cc-project/R-2CCL.git}
R2CCL_REF=${R2CCL_REF:-f45cbcb9f75e241531f014cd17c8586988ff4cd8}
NCCL_TESTS_GIT=${NCCL_TESTS_GIT:-https://github.com/NVIDIA/nccl-tests.git}
NCCL_TESTS_REF=${NCCL_TESTS_REF:-v2.19.6}
NCCL_GIT=${NCCL_GIT:-https://github.com/NVIDIA/nccl.git}
NCCL_REF=${NCCL_REF:-v2.23.4-1}
PYTHON_VERSION=${PYTHON_VERSION:-3.12}

# What the GPU image lacks (it has typer, rich, PyYAML, pandas, pyarrow, numpy, wrapt, narwhals,
# typing-extensions): r2bench's other dependencies and what they need in turn.
WHEELS=(
  "pydantic==2.13.4" "pydantic-core==2.46.4" "annotated-types==0.7.0" "typing-inspection==0.4.2"
  "typing-extensions==4.15.0"
  "fabric==3.2.3" "paramiko==5.1.0" "invoke==2.2.1" "decorator==5.2.1" "deprecated==1.3.1"
  "bcrypt==5.0.0" "pynacl==1.6.2" "cryptography==48.0.0" "cffi==2.0.0" "pycparser==3.0"
  "plotly==7.1.0" "narwhals==2.29.0"
)

# What the namespace GPU testbed needs where the image lacks it (gpu-check.sh step `tools`
# unpacks them into its work folder): iproute2, openssh and every library they load that a
# minimal Ubuntu/Debian image may not have. Debian packages of this machine's release.
DEBS=(
  iproute2 libbpf1 libbsd0 libcap2 libdb5.3 libelf1 libmnl0 libselinux1 libtirpc3 libxtables12
  libpcre2-8-0 libmd0 libzstd1 zlib1g libgssapi-krb5-2 libkrb5-3 libk5crypto3 libkrb5support0
  libcom-err2 libkeyutils1 openssh-server openssh-client openssh-sftp-server libwrap0 libnsl2
  libssl3 libcrypt1 libaudit1 libcap-ng0 libpam0g libsystemd0 libfido2-1 libcbor0.8 libedit2
  libudev1 liblz4-1 liblzma5 libgcrypt20 libgpg-error0 hostname
)

mkdir -p "$out/whl" "$out/src" "$out/debs"
echo "== Debian packages -> $out/debs"
(cd "$out/debs" && apt-get download "${DEBS[@]}" >/dev/null)
echo "== wheels for Python $PYTHON_VERSION -> $out/whl"
python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version "$PYTHON_VERSION" \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux_2_34_x86_64 -d "$out/whl" "${WHEELS[@]}"

bundle() { # name url ref -> $out/src/name.bundle: a git bundle holding `ref` as tag r2b-pin
  local name=$1 url=$2 ref=$3 tmp
  echo "== $name $ref"
  tmp=$(mktemp -d)
  git clone --quiet --no-checkout "$url" "$tmp/$name"
  git -C "$tmp/$name" tag r2b-pin "$ref^{commit}"
  local refs=(r2b-pin)
  git -C "$tmp/$name" rev-parse -q --verify "refs/tags/$ref" >/dev/null && refs+=("refs/tags/$ref")
  git -C "$tmp/$name" bundle create --quiet "$out/src/$name.bundle" "${refs[@]}"
  rm -rf "$tmp"
}
bundle R-2CCL "$R2CCL_GIT" "$R2CCL_REF"
bundle nccl-tests "$NCCL_TESTS_GIT" "$NCCL_TESTS_REF"
# NCCL itself (the vanilla recipe: the release R-2CCL forks): its whole history is large, so
# the bundle holds one commit with the tag's tree, tagged as the recipe names it.
tree_bundle() { # name url ref -> $out/src/name.bundle: one commit of `ref`'s tree, tagged `ref`
  local name=$1 url=$2 ref=$3 tmp
  echo "== $name $ref (tree only)"
  tmp=$(mktemp -d)
  git clone --quiet --bare --filter=blob:none "$url" "$tmp/src.git" 2>/dev/null \
    || git clone --quiet --bare "$url" "$tmp/src.git"
  mkdir "$tmp/tree" && git -C "$tmp/src.git" archive "$ref" | tar -x -C "$tmp/tree"
  git -C "$tmp/tree" init -q && git -C "$tmp/tree" add -A
  git -C "$tmp/tree" -c user.name=r2bench -c user.email=r2bench@localhost commit -qm "$ref"
  git -C "$tmp/tree" tag "$ref"
  git -C "$tmp/tree" bundle create --quiet "$out/src/$name.bundle" "refs/tags/$ref"
  rm -rf "$tmp"
}
tree_bundle nccl "$NCCL_GIT" "$NCCL_REF"
printf 'R-2CCL %s %s\nnccl-tests %s %s\nnccl %s %s\n' "$R2CCL_GIT" "$R2CCL_REF" \
  "$NCCL_TESTS_GIT" "$NCCL_TESTS_REF" "$NCCL_GIT" "$NCCL_REF" >"$out/src/SOURCES"

echo "== r2bench checkout -> $out/r2bench"
rm -rf "$out/r2bench" && mkdir -p "$out/r2bench"
git -C "$here" ls-files -z --cached --others --exclude-standard \
  | (cd "$here" && xargs -0 tar -cf - --ignore-failed-read 2>/dev/null) | tar -xf - -C "$out/r2bench"
git -C "$here" rev-parse HEAD >"$out/r2bench/.commit" 2>/dev/null || true
du -sh "$out"

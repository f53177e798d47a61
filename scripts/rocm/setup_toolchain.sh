#!/usr/bin/env bash
# Sets up what compiling the HIP sources for gfx942 needs on a machine with no ROCm install
# (see /work/shared/reference/rocm-toolchain.md for why each piece is the one it is):
#   * clang-19 / lld-19 / clang-tools-19 / llvm-19 / libclang-rt-19-dev (TSan) from the machine's own Debian suite (apt);
#   * HIP headers from sid's libamdhip64-dev and gfx942 device bitcode from trixie's
#     rocm-device-libs-17, downloaded (never installed) through a private apt state and unpacked into
#     <repo>/.toolchain/rocm/{include, amdgcn/bitcode, share/hip/version} (gitignored).
# Idempotent: a complete tree and installed compilers are left as they are. Prints the tree's path last.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
ROCM_TREE="${ROCM_TREE:-$REPO/.toolchain/rocm}"
LLVM_VERSION=19
HEADERS_SUITE=sid          # HIP 6.4+ headers: bookworm's 5.2 lack __hip_bfloat16, trixie's 5.7 its operators
HEADERS_PACKAGE=libamdhip64-dev
BITCODE_SUITE=trixie       # LLVM-17 bitcode with a gfx942 file, readable by clang-19
BITCODE_PACKAGE=rocm-device-libs-17
BITCODE_DIR=usr/lib/llvm-17/lib/clang/17/amdgcn/bitcode

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi

log() { echo "[setup_toolchain] $*" >&2; }

# ---- 1. compilers from the machine's own suite --------------------------------------------------
need_compilers=0
for tool in clang++-$LLVM_VERSION ld.lld-$LLVM_VERSION clang-offload-bundler-$LLVM_VERSION llvm-objdump-$LLVM_VERSION; do
  command -v "$tool" >/dev/null 2>&1 || need_compilers=1
done
# clang-offload-bundler is installed unversioned under the LLVM prefix
if [ -x /usr/lib/llvm-$LLVM_VERSION/bin/clang-offload-bundler ]; then :; else need_compilers=1; fi
# The ThreadSanitizer runtime of tests/rocm/test_races.py (libclang-rt, only a Recommends of clang).
ls /usr/lib/llvm-$LLVM_VERSION/lib/clang/*/lib/*/libclang_rt.tsan.a >/dev/null 2>&1 || need_compilers=1
if [ "$need_compilers" = 1 ]; then
  log "installing clang-$LLVM_VERSION lld-$LLVM_VERSION clang-tools-$LLVM_VERSION llvm-$LLVM_VERSION libclang-rt-$LLVM_VERSION-dev"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    clang-$LLVM_VERSION lld-$LLVM_VERSION clang-tools-$LLVM_VERSION llvm-$LLVM_VERSION \
    libclang-rt-$LLVM_VERSION-dev >/dev/null
fi

# ---- 2. HIP headers + gfx942 bitcode ------------------------------------------------------------
tree_complete() {
  [ -f "$ROCM_TREE/include/hip/hip_runtime.h" ] && [ -f "$ROCM_TREE/share/hip/version" ] &&
    ls "$ROCM_TREE"/amdgcn/bitcode/oclc_isa_version_942.bc >/dev/null 2>&1
}

if ! tree_complete; then
  # The same mirror the machine's apt already uses (deb822 `URIs:` or one-line `deb URL suite ...`).
  mirror="$(grep -hsE '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}' | grep -m1 '/debian/\?$' || true)"
  if [ -z "$mirror" ]; then
    mirror="$(grep -hsE '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list |
      awk '{for (i = 2; i <= NF; i++) if ($i ~ /^(https?|file):/) {print $i; exit}}' | grep -m1 '/debian/\?$' || true)"
  fi
  mirror="${mirror:-http://deb.debian.org/debian}"
  keyring=/usr/share/keyrings/debian-archive-keyring.gpg
  log "mirror $mirror"

  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  chmod 755 "$work"  # apt downloads as the unprivileged _apt user
  mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/etc/apt.conf.d" "$work/etc/preferences.d" "$work/debs"
  cat >"$work/etc/sources.list" <<SOURCES
deb [signed-by=$keyring] $mirror $HEADERS_SUITE main
deb [signed-by=$keyring] $mirror $BITCODE_SUITE main
SOURCES
  apt_private=(-o Dir::State::Lists="$work/lists" -o Dir::Cache="$work/cache"
    -o Dir::Etc::SourceList="$work/etc/sources.list" -o Dir::Etc::SourceParts="$work/etc/none"
    -o Dir::Etc::Parts="$work/etc/apt.conf.d" -o Dir::Etc::PreferencesParts="$work/etc/preferences.d"
    -o Dir::State::status=/dev/null -o APT::Architecture=amd64 -o Debug::NoLocking=1)
  chmod -R a+rwX "$work"
  apt-get "${apt_private[@]}" update -qq
  (cd "$work/debs" &&
    apt-get "${apt_private[@]}" download "$HEADERS_PACKAGE/$HEADERS_SUITE" "$BITCODE_PACKAGE/$BITCODE_SUITE" >/dev/null)
  for deb in "$work"/debs/*.deb; do dpkg-deb -x "$deb" "$work/root"; done

  rm -rf "$ROCM_TREE"
  mkdir -p "$ROCM_TREE/amdgcn" "$ROCM_TREE/share/hip"
  cp -a "$work/root/usr/include" "$ROCM_TREE/include"
  cp -a "$work/root/$BITCODE_DIR" "$ROCM_TREE/amdgcn/bitcode"
  # Without share/hip/version clang assumes HIP 3.5 and skips its runtime wrapper.
  cp -a "$work/root/usr/share/hip/version" "$ROCM_TREE/share/hip/version"
  tree_complete || { log "the unpacked tree is incomplete: $ROCM_TREE"; exit 1; }
fi

log "clang: $(command -v clang++-$LLVM_VERSION)"
log "HIP $(grep -m1 HIP_VERSION_MAJOR "$ROCM_TREE/share/hip/version" | cut -d= -f2).$(grep -m1 HIP_VERSION_MINOR "$ROCM_TREE/share/hip/version" | cut -d= -f2) headers + gfx942 bitcode in:"
echo "$ROCM_TREE"

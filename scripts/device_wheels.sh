#!/usr/bin/env bash
# Downloads into .whl/ (gitignored) the wheels the H200 image ('cuda', Python 3.12) lacks for
# loading and testing gemm there:
#   kernels==0.17.2           the loader. At `import kernels` + get_kernel with LOCAL_KERNELS it
#                             imports only huggingface_hub, packaging and yaml besides torch, all in
#                             the image (checked against huggingface_hub 1.33.0, the image's); its
#                             other declared deps, sigstore and tomlkit, are imported only by
#                             signature verification and lock files, so they are not carried.
#   kernel-abi-check==0.14.1  tests/test_packaging.py's ABI check of the built extension.
# On the device, name ".whl" in `carry` and start the command with:
#   python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
WHEELS=(kernels==0.17.2 kernel-abi-check==0.14.1)
PYTHON_VERSION=3.12
# pip matches manylinux tags exactly: list every glibc baseline these wheels may be tagged with.
PLATFORMS=(manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64)

mkdir -p .whl
# One version of each on the device, or the install stops: drop older downloads of these names.
for spec in "${WHEELS[@]}"; do
  name="${spec%%==*}"
  find .whl -maxdepth 1 -name "${name//-/_}-*.whl" ! -name "${name//-/_}-${spec##*==}-*" -delete
done
python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
  --python-version "$PYTHON_VERSION" --implementation cp "${PLATFORMS[@]/#/--platform=}" \
  -d .whl "${WHEELS[@]}"
ls -1 .whl

#!/usr/bin/env bash
# Downloads into .whl/ (gitignored) the wheels a GPU image with Python 3.12, torch, transformers 5.17
# and huggingface_hub 1.33 lacks for loading and testing gemm there, one exact version of each:
#   kernels==0.19.1            the loader (built per CPython minor: the cp312 wheel);
#   transformers==5.25.0       the FP8 client scripts/transformers_e2e.py drives (needs kernels
#                              >= 0.19.1 and huggingface-hub >= 2.4);
#   huggingface_hub==2.4.0     with what it imports that the image lacks: httpx2, httpcore2, hf_xet,
#                              click; and httpx2's anyio, idna, truststore;
#   tomlkit==0.15.3            imported by kernels 0.19;
#   accelerate==1.16.0         transformers refuses to load an FP8 checkpoint without it;
#   kernel-abi-check==0.14.1   tests/test_packaging.py's ABI check of the built extension.
# The rest of their dependencies (h11, psutil, filelock, fsspec, packaging, pyyaml, regex, safetensors,
# tokenizers, tqdm, typer, typing-extensions, numpy) come from the image; --no-deps keeps pip from
# looking for them. The set was installed and imported together on such an image.
# On the device, name ".whl" in `carry` and start the command with:
#   python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
WHEELS=(
  kernels==0.19.1 transformers==5.25.0 huggingface_hub==2.4.0 kernel-abi-check==0.14.1
  httpx2==2.17.0 httpcore2==2.17.0 hf_xet==1.8.0 click==8.5.1 tomlkit==0.15.3
  truststore==0.10.5 idna==3.21 anyio==4.16.0 accelerate==1.16.0
)
PYTHON_VERSION=3.12
# pip matches manylinux tags exactly: list every glibc baseline these wheels may be tagged with.
PLATFORMS=(manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64)

mkdir -p .whl
# One version of each on the device, or the install stops: drop other downloads of these names
# (wheel file names spell the distribution with underscores, in any case).
for spec in "${WHEELS[@]}"; do
  name="${spec%%==*}"
  find .whl -maxdepth 1 -iname "${name//-/_}-*.whl" ! -iname "${name//-/_}-${spec##*==}-*" -delete
done
python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
  --python-version "$PYTHON_VERSION" --implementation cp "${PLATFORMS[@]/#/--platform=}" \
  -d .whl "${WHEELS[@]}"
ls -1 .whl

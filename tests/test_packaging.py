"""Packaging checks: build.toml, the built variant's layout and metadata, loading, ABI."""

from __future__ import annotations

import ast
import json
import platform
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import torch
from _helpers import KERNEL_VERSION, REPO_ID, REPO_ROOT, kernel_root, local_variant_dir
from kernels._rust import Build

BUILD_TOML = REPO_ROOT / "build.toml"
PYTHON_SOURCES = REPO_ROOT / "torch-ext" / "gemm"
# kernel-builder's ROCm arch list (build.toml's rocm-archs are intersected with it).
KERNEL_BUILDER_ROCM_ARCHS = {
    "gfx906", "gfx908", "gfx90a", "gfx942", "gfx950",
    "gfx1030", "gfx1100", "gfx1101", "gfx1200", "gfx1201",
}  # fmt: skip

def config() -> dict:
    with open(BUILD_TOML, "rb") as f:
        return tomllib.load(f)


def metadata(variant_dir: Path) -> dict:
    return json.loads((variant_dir / "metadata.json").read_text())


def extension(variant_dir: Path) -> Path:
    libraries = sorted(variant_dir.glob("*.so"))
    assert len(libraries) == 1, f"expected one extension in {variant_dir}, found {[p.name for p in libraries]}"
    return libraries[0]


def run_python(code: str, **env: str) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh interpreter (nothing loaded yet) and returns the finished process."""
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**_base_env(), **env}
    )
    assert result.returncode == 0, f"fresh interpreter failed:\n{result.stdout}{result.stderr}"
    return result


def _base_env() -> dict[str, str]:
    import os

    env = dict(os.environ)
    env.pop("LOCAL_KERNELS", None)
    return env


# What a fresh process reports after loading the kernel: its file, _ops namespace and ops.
LOAD_REPORT = """
import json, sys, torch
mod = {load}
ops_ns = mod._ops.ops.name
names = [n for n in torch._C._dispatch_get_all_op_names() if n.startswith(ops_ns + "::")]
print(json.dumps({{"file": mod.__file__, "ops_ns": ops_ns, "ops": names,
                  "prefix": mod._ops.add_op_namespace_prefix("x")}}))
"""


# ---------------------------------------------------------------------------------------- build.toml


@pytest.mark.kernels_ci
def test_build_toml_schema():
    build = Build.open(REPO_ROOT)  # kernel-builder's own schema check (deny_unknown_fields)
    cfg = config()
    general = cfg["general"]
    assert (general["name"], general["version"], general["edition"]) == ("gemm", 1, 5)
    assert general["license"] == "apache-2.0"
    assert general["hub"]["repo-id"] == REPO_ID
    section_backends = {k["backend"] for k in cfg["kernel"].values()}
    declared = {str(b).lower() for b in build.general.backends}
    assert declared == set(general["backends"]) == section_backends == {"cpu", "cuda", "rocm"}


@pytest.mark.kernels_ci
def test_build_toml_schema_check_rejects_unknown_keys(tmp_path):
    # Proves the schema check above is live: an unknown key must be refused.
    (tmp_path / "build.toml").write_text(BUILD_TOML.read_text() + '\n[torch.extra]\nnot-a-key = 1\n')
    with pytest.raises(ValueError):
        Build.open(tmp_path)


@pytest.mark.kernels_ci
def test_build_toml_files_exist():
    cfg = config()
    sections = {"torch": cfg["torch"], **{f"kernel.{n}": k for n, k in cfg["kernel"].items()}}
    missing = [f"[{name}] {f}" for name, s in sections.items() for f in s["src"] if not (REPO_ROOT / f).is_file()]
    assert not missing, f"build.toml lists files that do not exist: {missing}"


# Where each backend's sources live (DEVELOPING.md); kernel-builder sees only the files listed.
BACKEND_SOURCE_GLOBS = {
    "rocm": ["gemm/*.hip", "gemm/*.h"],
    "cuda": ["gemm/cuda/*"],
    "cpu": ["gemm/cpu/*"],
}


@pytest.mark.kernels_ci
def test_build_toml_lists_every_backend_source():
    listed = {k["backend"]: set(k["src"]) for k in config()["kernel"].values()}
    unlisted = {
        backend: sorted(p.relative_to(REPO_ROOT).as_posix() for g in globs for p in REPO_ROOT.glob(g)
                        if p.is_file() and p.relative_to(REPO_ROOT).as_posix() not in listed[backend])
        for backend, globs in BACKEND_SOURCE_GLOBS.items()
    }  # fmt: skip
    assert not any(unlisted.values()), f"sources missing from build.toml (Nix builds would lack them): {unlisted}"


@pytest.mark.kernels_ci
def test_build_toml_archs():
    kernels_by_backend = {k["backend"]: k for k in config()["kernel"].values()}
    assert kernels_by_backend["cuda"]["cuda-capabilities"] == ["9.0a"]
    assert kernels_by_backend["rocm"]["rocm-archs"] == ["gfx942"]
    assert set(kernels_by_backend["rocm"]["rocm-archs"]) <= KERNEL_BUILDER_ROCM_ARCHS


@pytest.mark.kernels_ci
def test_build_script_refuses_missing_source(tmp_path):
    # A stale source list must stop the build with the missing file named, not build half a kernel.
    shutil.copy(BUILD_TOML, tmp_path / "build.toml")
    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts" / "build.py"), "--root", str(tmp_path)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode != 0
    assert "torch-ext/torch_binding.cpp" in result.stderr, result.stderr


# The kernel-builder revision kernels-community/activation's lock pins (kernel-builder.md).
KERNEL_BUILDER_REV = "18c4d686a271ca6e56d0110fd36a9a5f58e86215"


@pytest.mark.kernels_ci
def test_flake():
    flake = (REPO_ROOT / "flake.nix").read_text()
    assert 'kernel-builder.url = "github:huggingface/kernels"' in flake
    assert "kernel-builder.lib.genKernelFlakeOutputs" in flake
    lock = json.loads((REPO_ROOT / "flake.lock").read_text())
    assert lock["version"] == 7 and lock["root"] == "root"
    nodes = lock["nodes"]
    assert nodes["root"]["inputs"] == {"kernel-builder": "kernel-builder"}
    builder = nodes["kernel-builder"]
    assert (builder["locked"]["owner"], builder["locked"]["repo"]) == ("huggingface", "kernels")
    assert builder["locked"]["rev"] == KERNEL_BUILDER_REV
    assert set(builder["inputs"]) == {"flake-compat", "flake-utils", "nixpkgs", "rust-overlay"}
    assert nodes["rust-overlay"]["inputs"]["nixpkgs"] == ["kernel-builder", "nixpkgs"]
    for name, node in nodes.items():
        if name == "root":
            continue
        locked = node["locked"]
        assert locked["type"] == "github" and len(locked["rev"]) == 40, name
        assert locked["narHash"].startswith("sha256-"), name
        # Every input a node names (directly or by `follows` path) is a node of the lock.
        for target in node.get("inputs", {}).values():
            assert (target if isinstance(target, str) else target[-1]) in nodes, (name, target)


# ----------------------------------------------------------------------------------- built variant


def expected_variant_name() -> str:
    major, minor = torch.__version__.split("+")[0].split(".")[:2]
    if torch.version.cuda is not None:
        compute = "cu" + "".join(torch.version.cuda.split(".")[:2])
    elif torch.version.hip is not None:
        compute = "rocm" + "".join(torch.version.hip.split("-")[0].split(".")[:2])
    else:
        compute = "cpu"
    abi = "cxx11" if torch.compiled_with_cxx11_abi() else "cxx98"
    return f"torch{major}{minor}-{abi}-{compute}-{platform.machine()}-linux"


@pytest.mark.kernels_ci
def test_variant_layout():
    variant_dir = local_variant_dir()
    assert variant_dir.name == expected_variant_name()
    meta = metadata(variant_dir)
    assert extension(variant_dir).name == f"{meta['id']}.abi3.so"
    for source in PYTHON_SOURCES.rglob("*.py"):
        built = variant_dir / source.relative_to(PYTHON_SOURCES)
        assert built.is_file(), f"{built} missing from the build"
        assert built.read_bytes() == source.read_bytes(), f"{built} is stale: rebuild"


@pytest.mark.kernels_ci
def test_metadata_lists_built_archs():
    variant_dir = local_variant_dir()
    meta = metadata(variant_dir)
    cfg = config()
    backend = meta["backend"]["type"]
    assert {k: meta[k] for k in ("name", "version", "license", "python-depends")} == {
        "name": "gemm", "version": 1, "license": "apache-2.0", "python-depends": [],
    }  # fmt: skip
    assert meta["id"].startswith(f"_gemm_{backend}_")
    section = next(k for k in cfg["kernel"].values() if k["backend"] == backend)
    expected = {
        "cpu": [],
        "cuda": section.get("cuda-capabilities", []),
        "rocm": sorted(set(section.get("rocm-archs", [])) & KERNEL_BUILDER_ROCM_ARCHS),
    }[backend]
    assert meta["backend"]["archs"] == expected


@pytest.mark.kernels_ci
def test_metadata_provenance():
    # The fields kernel-builder writes, read back by the `kernels` loader's own parser.
    from kernels._rust import Metadata

    variant_dir = local_variant_dir()
    meta = metadata(variant_dir)
    assert meta["kernel-depends"] == []
    provenance = meta["provenance"]
    assert provenance["kernel-builder"]["version"]
    parsed = Metadata.from_bytes((variant_dir / "metadata.json").read_bytes())
    assert parsed.provenance is not None
    if "kernel" in provenance:  # absent only when built from a tree without git
        assert re.fullmatch(r"[0-9a-f]{40}", provenance["kernel"]["commit"])
        assert meta["id"].endswith("_dirty") == provenance["kernel"]["dirty"]
        assert parsed.provenance.kernel.dirty == provenance["kernel"]["dirty"]


@pytest.mark.kernels_ci
def test_metadata_digest_matches_the_files(tmp_path):
    # kernels >= 0.19 re-hashes a local build at every load and refuses one whose files differ from
    # the digest; a build without one loads with a warning. Checked with the loader's own hashing.
    from kernels._rust import Digest, DigestValidationError, Metadata

    variant_dir = local_variant_dir()
    expected = Metadata.from_bytes((variant_dir / "metadata.json").read_bytes()).digest
    assert expected is not None, "metadata.json records no digest"
    assert set(expected.files) == {
        p.relative_to(variant_dir).as_posix() for p in variant_dir.rglob("*")
        if p.is_file() and p.name != "metadata.json" and "__pycache__" not in p.parts
    }  # fmt: skip
    expected.validate(Digest.hash_variant(expected.algorithm, variant_dir))
    # The check can fail: a file that the digest does not name is refused.
    copy = tmp_path / variant_dir.name
    shutil.copytree(variant_dir, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "extra.py").write_text("")
    with pytest.raises(DigestValidationError):
        expected.validate(Digest.hash_variant(expected.algorithm, copy))


def device_code_archs(library: Path, backend: str) -> set[str]:
    """Archs whose device code is really inside `library` (cuobjdump / HIP bundle ids)."""
    if backend == "cuda":
        cuobjdump = shutil.which("cuobjdump")
        if cuobjdump is None:
            pytest.skip("cuobjdump not installed: cannot list the sm_ code in the CUDA build")
        listing = subprocess.run([cuobjdump, "--list-elf", str(library)], capture_output=True, text=True).stdout
        # "ELF file 1: <name>.1.sm_90a.cubin" -> "9.0a" (the last digit is the minor version)
        return {f"{major}.{minor}{suffix}" for major, minor, suffix in re.findall(r"\bsm_(\d+)(\d)([af]?)\b", listing)}
    # HIP offload bundles name each code object "hipv4-amdgcn-amd-amdhsa--<arch>" in plain text.
    data = library.read_bytes()
    return {arch for arch in KERNEL_BUILDER_ROCM_ARCHS if f"amdgcn-amd-amdhsa--{arch}".encode() in data}


@pytest.mark.kernels_ci
def test_device_code_matches_metadata():
    variant_dir = local_variant_dir()
    meta = metadata(variant_dir)
    backend = meta["backend"]["type"]
    if backend == "cpu":
        assert meta["backend"]["archs"] == []
        return
    assert device_code_archs(extension(variant_dir), backend) == set(meta["backend"]["archs"])


@pytest.mark.kernels_ci
def test_ops_namespace_is_metadata_id():
    variant_dir = local_variant_dir()
    ops_id = metadata(variant_dir)["id"]
    ops_py = (variant_dir / "_ops.py").read_text()
    tree = ast.parse(ops_py)
    imported = [a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level == 1 for a in n.names]
    assert imported == [ops_id]
    assert f"ops = torch.ops.{ops_id}\n" in ops_py


# ------------------------------------------------------------------------------------------ loading


@pytest.mark.kernels_ci
def test_get_kernel_with_local_kernels_in_fresh_process():
    variant_dir = local_variant_dir()
    ops_id = metadata(variant_dir)["id"]
    load = f"__import__('kernels').get_kernel({REPO_ID!r}, version={KERNEL_VERSION})"
    result = run_python(LOAD_REPORT.format(load=load), LOCAL_KERNELS=f"{REPO_ID}={kernel_root()}")
    report = json.loads(result.stdout.splitlines()[-1])
    assert Path(report["file"]).parent == variant_dir
    assert report["ops_ns"] == ops_id and report["prefix"] == f"{ops_id}::x"
    assert report["ops"], f"no op registered under torch.ops.{ops_id}"
    # The loader verified the digest: it warns only when there is none or it does not match.
    assert "digest" not in result.stderr, result.stderr


@pytest.mark.kernels_ci
def test_get_local_kernel_in_fresh_process():
    variant_dir = local_variant_dir()
    ops_id = metadata(variant_dir)["id"]
    load = f"__import__('kernels').get_local_kernel(__import__('pathlib').Path({str(kernel_root())!r}))"
    report = json.loads(run_python(LOAD_REPORT.format(load=load)).stdout.splitlines()[-1])
    assert Path(report["file"]).parent == variant_dir
    assert report["ops_ns"] == ops_id and report["ops"]


@pytest.mark.kernels_ci
def test_session_kernel_is_the_local_build(kernel):
    assert Path(kernel.__file__).parent == local_variant_dir()


# -------------------------------------------------------------------------------------------- ABI


@pytest.mark.kernels_ci
def test_abi_check():
    from kernel_abi_check import ObjectFile

    # What the Hub requires of every variant, with no exception for the build host's glibc.
    library = ObjectFile(str(extension(local_variant_dir())))
    assert library.check_python_abi("3.9") == []
    assert library.check_manylinux("manylinux_2_28") == []


# ------------------------------------------------------------------------------------------- card


@pytest.mark.kernels_ci
def test_card_renders_with_kernel_builder_context():
    # kernel-builder renders CARD.md (minijinja) with these names at upload; jinja2 reads the same
    # syntax. Every public function must be listed and the example must name the repository.
    import jinja2

    all_names = next(
        [ast.literal_eval(e) for e in node.value.elts]
        for node in ast.parse((PYTHON_SOURCES / "__init__.py").read_text()).body
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "__all__"
    )
    general = config()["general"]
    card = jinja2.Environment(undefined=jinja2.StrictUndefined).from_string((REPO_ROOT / "CARD.md").read_text())
    text = card.render(
        repo_id=general["hub"]["repo-id"], version=general["version"], functions=all_names, layers=[],
        has_benchmark=True, upstream=None, source=None, license=general["license"],
    )  # fmt: skip
    assert text.startswith("---\nlibrary_name: kernels\nlicense: apache-2.0\n")
    assert f'get_kernel("{REPO_ID}", version={KERNEL_VERSION})' in text
    for name in all_names:
        assert f"- `{name}`" in text
    for section in ("## What it does", "## Backends", "## How to use", "## Benchmarks"):
        assert section in text

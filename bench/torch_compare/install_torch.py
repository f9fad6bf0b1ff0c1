"""Puts a CPU-usable PyTorch from PyPI into a virtual environment, as light as it will go.

PyPI's only Linux x86_64 torch wheel is the CUDA build, and `pip install torch` drags in
several GB of nvidia-* / cuda-toolkit wheels that a CPU run never calls. Its native libraries do
link against them, though, so `--no-deps` alone does not import (libcufile.so.0 and friends are
missing, or an older system CUDA library lacks a symbol). So the install goes in tiers, each
verified by importing torch in a fresh process:
  1. torch with --no-deps plus its pure-Python requirements and NumPy (enough where the system
     already has matching CUDA libraries, or for a CPU-only wheel);
  2. then, one at a time, only the CUDA library package that the failed import names (a missing
     libX.so or an undefined symbol of X), at the version torch's own metadata pins;
  3. if the error names nothing we can map, the plain `pip install torch` with every dependency.
The venv is reused when it already imports. Exit 0 with the venv ready, 3 with the reason.
  python3 install_torch.py VENV_DIR
"""
import os
import re
import subprocess
import sys

# What an import needs to prove: the pieces the benchmark uses (NumPy too: torch.distributed
# sends the pipeline's shape metadata as pickled objects, which needs it).
PROBE = (
    "import numpy, torch, torch.distributed as d, torch.distributed.pipelining as p;"
    "assert d.is_gloo_available(), 'this torch build has no gloo backend';"
    "print(torch.__version__)"
)

# The installation log inside the venv: which tier it took, for the report's paragraph.
NOTE_FILE = "gpipe-bench-install.txt"

# CUDA components: a library stem or symbol prefix (as the loader names it) -> the component's
# key in torch's requirements (a cuda-toolkit[...] extra, or a substring of an nvidia-* name).
# Longest prefixes first, so that cusparseLt wins over cusparse and cublasLt over cublas.
COMPONENTS = [
    ("cusparseLt", ["cusparselt"]),
    ("cusparse", ["cusparse"]),
    ("cublasLt", ["cublas"]),
    ("cublas", ["cublas"]),
    ("cudnn", ["cudnn"]),
    ("nccl", ["nccl"]),
    ("nvshmem", ["nvshmem"]),
    ("cufile", ["cufile"]),
    ("cuFile", ["cufile"]),
    ("cufft", ["cufft"]),
    ("cusolver", ["cusolver"]),
    ("curand", ["curand"]),
    ("nvJitLink", ["nvjitlink"]),
    ("nvrtc", ["nvrtc"]),
    ("cupti", ["cupti"]),
    ("nvToolsExt", ["nvtx"]),
    ("nvtx", ["nvtx"]),
    ("cudart", ["cudart", "cuda-runtime"]),
    ("cuda", ["cudart", "cuda-runtime"]),
]


def fail(reason):
    print(f"torch_compare: cannot install PyTorch: {reason}", file=sys.stderr)
    sys.exit(3)


def log(message):
    print(f"torch_compare: {message}", file=sys.stderr, flush=True)


def pip(venv, *args):
    """Runs pip in the venv; on failure stops with pip's last lines as the reason."""
    command = [os.path.join(venv, "bin", "python"), "-m", "pip", "--disable-pip-version-check",
               "install", "--quiet", *args]
    log("pip install " + " ".join(args))
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    except subprocess.TimeoutExpired:
        fail(f"`pip install {' '.join(args)}` took over 30 minutes (is PyPI reachable?)")
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        fail(f"`pip install {' '.join(args)}` exited {done.returncode}:\n{tail}")


def probe(venv):
    """(True, version) when torch imports with gloo and pipelining, else (False, error text)."""
    done = subprocess.run([os.path.join(venv, "bin", "python"), "-c", PROBE],
                          capture_output=True, text=True, timeout=300)
    if done.returncode == 0:
        return True, done.stdout.strip()
    return False, done.stderr.strip()


def torch_requirements(venv):
    """torch's Requires-Dist entries whose markers hold here, as requirement strings."""
    script = (
        "import importlib.metadata as m\n"
        "from pip._vendor.packaging.requirements import Requirement\n"
        "for text in m.requires('torch') or []:\n"
        "    r = Requirement(text)\n"
        "    if r.marker is None or r.marker.evaluate({'extra': ''}):\n"
        "        r.marker = None\n"
        "        print(r)\n")
    done = subprocess.run([os.path.join(venv, "bin", "python"), "-c", script],
                          capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        fail("cannot read torch's requirements: " + done.stderr.strip()[-500:])
    return [line.strip() for line in done.stdout.splitlines() if line.strip()]


def is_cuda_requirement(text):
    name = re.split(r"[\[<>=!~ ;]", text, maxsplit=1)[0].lower()
    return name.startswith(("nvidia-", "cuda-", "triton"))


def requirement_for(error, requirements):
    """The single requirement that provides the library the import error names, or None."""
    missing = re.search(r"lib([A-Za-z_]+?)(?:[0-9]*)\.so[.0-9]*: cannot open shared object", error)
    symbol = re.search(r"undefined symbol: _?([A-Za-z_][A-Za-z0-9_]*)", error)
    stem = missing.group(1) if missing else symbol.group(1) if symbol else None
    if stem is None:
        return None
    for prefix, keys in COMPONENTS:
        if not stem.startswith(prefix):
            continue
        for text in requirements:
            toolkit = re.match(r"cuda-toolkit\[([^\]]*)\](.*)", text)
            if toolkit:
                extras = [e.strip() for e in toolkit.group(1).split(",")]
                for key in keys:
                    if key in extras:
                        return f"cuda-toolkit[{key}]{toolkit.group(2)}"
                continue
            name = re.split(r"[\[<>=!~ ;]", text, maxsplit=1)[0].lower()
            if name.startswith("nvidia-") and any(key in name for key in keys):
                return text
        return None
    return None


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    venv = os.path.abspath(sys.argv[1])
    python = os.path.join(venv, "bin", "python")
    if os.path.exists(python):
        ok, version = probe(venv)
        if ok:
            log(f"reusing {venv} (torch {version})")
            return
    else:
        log(f"creating the virtual environment {venv}")
        done = subprocess.run([sys.executable, "-m", "venv", venv], capture_output=True, text=True)
        if done.returncode != 0:
            fail(f"`python3 -m venv {venv}` failed (Debian: apt-get install python3-venv):\n"
                 + done.stderr.strip()[-800:])

    # Tier 1: the wheel alone and its pure-Python requirements.
    pip(venv, "--no-deps", "torch")
    requirements = torch_requirements(venv)
    pure = [r for r in requirements if not is_cuda_requirement(r)] + ["numpy"]
    pip(venv, *pure)
    added = []
    ok, detail = probe(venv)

    # Tier 2: the CUDA library packages the loader asks for, one by one.
    while not ok and len(added) < len(COMPONENTS):
        wanted = requirement_for(detail, requirements)
        if wanted is None or wanted in added:
            break
        log("torch does not import yet: " + detail.splitlines()[-1][:200])
        pip(venv, wanted)
        added.append(wanted)
        ok, detail = probe(venv)

    # Tier 3: everything torch asks for.
    tier = f"--no-deps, plus {len(added)} CUDA library package(s): {', '.join(added) or 'none'}"
    if not ok:
        log("falling back to the full `pip install torch` (several GB of CUDA wheels): "
            + detail.splitlines()[-1][:200])
        pip(venv, "torch")
        tier = "full `pip install torch` with all CUDA dependencies"
        ok, detail = probe(venv)
        if not ok:
            fail("torch was installed but does not import:\n" + detail[-1500:])
    with open(os.path.join(venv, NOTE_FILE), "w") as note:
        note.write(tier + "\n")
    log(f"torch {detail} ready in {venv} ({tier})")


if __name__ == "__main__":
    main()

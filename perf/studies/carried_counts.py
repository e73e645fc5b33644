"""``python -m perf.studies.carried_counts --out DIR [--rehearse]``: the count tier's whole
software stack, packed to be carried to another host that lacks it, where ``DIR/run.sh``
adds that host's count runs to the recorded file (``perf.studies.emulated_counts --again``).

Counts depend on the Python, torch and TensorRT versions, so a second host must run this
machine's own. The lent GPU host has Python 3.12 and torch 2.11, no TensorRT, no network, and
a device call carries at most 64 MiB beside the working tree; so the stack goes in chunks, as
small as the count tier allows:

- this Python (``sys.base_prefix``), without its tests, tkinter, idlelib, ensurepip, static
  libraries and headers;
- of site-packages, only the files a count run of the quick suite opens (traced with
  ``strace -f``), the sources of the bytecode it opens (Python reads a cached ``.pyc`` only
  beside its source) and the metadata of each distribution one of those files belongs to;
  nothing of ``nvidia/`` (the host's own CUDA libraries are linked in: the same CUDA 13) nor
  of triton (500 MB: torch imports it when present; the counts are the same without it);
- the GPU code of every library zeroed (sections ``.nv_fatbin`` and ``__nv_relfatbin``;
  every header kept, so each library loads and registers its kernels as before; a count run
  never launches one): ``libtorch_cuda.so`` compresses to 18 MB instead of 307;
- ``--own-lib``: this machine's copy of a host library that is too old there (NCCL: the
  host's lacks ``ncclCommResume``, which this torch links), zeroed the same way.

``--rehearse`` unpacks DIR here the way the host will and counts once with the carried stack
(the count servers see no GPU, Note [A server sees no GPU]); every series must equal this
machine's own count run. On the host, with the chunks in /tmp/carried:
``bash run.sh NAME RUNS COMMIT OUTFILE`` (docs/regressions.md, "On a second physical host")."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

from perf.studies.emulated_counts import NATIVE, ROOT, counts

SITE = Path(sysconfig.get_paths()["purelib"])
WITHOUT = ("nvidia", "triton")  # the host's own CUDA libraries; torch counts the same without
STDLIB_WITHOUT = ("test", "site-packages", "idlelib", "tkinter", "ensurepip")
DEVICE_CODE = (".nv_fatbin", "__nv_relfatbin")
FATBIN_MAGIC = 0xBA55ED50
OWN_LIBS = ("nvidia/nccl/lib/libnccl.so.2",)
RECORDED = ROOT / "perf-data/results/count_spread_emulated_c49.json"

RUN_SH = r"""#!/bin/bash
# Unpack the carried stack (chunks in $CARRIED) and add this host's count runs to OUTFILE as
# machine NAME: bash run.sh NAME RUNS COMMIT OUTFILE, from the repository's root.
set -e
NAME=$1; RUNS=$2; COMMIT=$3; OUTF=$4
HERE=$PWD; KIT=$(cd "$(dirname "$0")" && pwd); CARRIED=${CARRIED:-/tmp/carried}
SP=$CARRIED/venv/lib/@PYTHON@/site-packages
if [ ! -d $CARRIED/venv ]; then
  echo "== unpack $(date +%T)"
  cd $CARRIED
  cat c[0-9][0-9] | LD_LIBRARY_PATH=$KIT $KIT/zstd -q -d --long=30 | tar -xf - && rm c[0-9][0-9]
  cd $HERE
  LD_LIBRARY_PATH=$CARRIED/py/lib $CARRIED/py/bin/python3 -m venv --without-pip $CARRIED/venv
  rm -rf $SP && mv $CARRIED/sp $SP
  # the host's CUDA libraries, with this machine's own where theirs is too old
  NV=${NV:-$(python3 -c "import nvidia; print(list(nvidia.__path__)[0])")}
  mkdir -p $SP/nvidia
  for d in $NV/*; do [ -e $SP/nvidia/$(basename $d) ] || ln -s $d $SP/nvidia/; done
fi
export LD_LIBRARY_PATH=$CARRIED/py/lib
PYTHONPATH=$HERE $CARRIED/venv/bin/python -c "import torch, torch_trt_ref
print('torch', torch.__version__, 'GPU visible:', torch.cuda.is_available())"
echo "== counts $(date +%T)"
PYTHONUNBUFFERED=1 PYTHONPATH=$HERE $CARRIED/venv/bin/python -m perf.studies.emulated_counts \
  --again $NAME --native $RUNS --canaries 3 --root $HERE --commit $COMMIT --out $OUTF
"""


def zero_device_code(src: Path, dst: Path) -> int:
    """Copy the ELF library src to dst with the payload of every fatbin entry in its device
    code sections zeroed and every header kept; returns the bytes zeroed. The walk must
    account for each section exactly (fatbins back to back, 8-byte zero padding between),
    or nothing is written."""
    data = bytearray(src.read_bytes())
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    entsize, count, names_at = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * entsize) for i in range(count)]
    names = headers[names_at][4]
    zeroed = 0
    for header in headers:
        name = data[names + header[0]:data.index(b"\0", names + header[0])].decode()
        if name not in DEVICE_CODE or header[1] == 8:  # SHT_NOBITS holds nothing
            continue
        spans, at, end = [], header[4], header[4] + header[5]
        while at < end:
            if struct.unpack_from("<I", data, at)[0] != FATBIN_MAGIC:
                if any(data[at:at + 8]):
                    raise ValueError(f"{src}: {name} at {at:#x} is neither a fatbin nor padding")
                at += 8
                continue
            header_size, fat_size = struct.unpack_from("<HQ", data, at + 6)
            entry, stop = at + header_size, at + header_size + fat_size
            while entry < stop and header_size:
                entry_header, payload = struct.unpack_from("<IQ", data, entry + 4)
                if not entry_header:  # a header of no size: the walk would not move
                    break
                spans.append((entry + entry_header, entry + entry_header + payload))
                entry += entry_header + payload
            if entry != stop or not header_size or stop > end:
                raise ValueError(f"{src}: a fatbin of {name} at {at:#x} does not add up")
            at = stop
        for a, b in spans:
            data[a:b] = bytes(b - a)
            zeroed += b - a
    dst.write_bytes(data)
    return zeroed


def opened_files(trace: Path) -> set[Path]:
    """The regular files a ``strace -f -e trace=%file`` log shows opened or looked at."""
    found = set()
    for line in trace.read_text().splitlines():
        if "= -1" in line:
            continue
        for path in re.findall(r'"(/[^"]+)"', line):
            p = Path(os.path.normpath(path))
            if p.is_file() and not p.is_symlink():
                found.add(p)
    return found


def site_files(opened: set[Path], site: Path = SITE) -> set[str]:
    """What of site-packages to carry, relative to it: the files opened (but nothing under
    WITHOUT), the source of each cached ``.pyc`` opened, and the whole metadata folder of
    each distribution whose RECORD names a file carried."""
    keep = set()
    for path in opened:
        if not path.is_relative_to(site):
            continue
        rel = path.relative_to(site)
        if rel.parts[0].startswith(WITHOUT) or rel.parts[0].startswith("__editable__"):
            continue
        keep.add(str(rel))
        if rel.parent.name == "__pycache__" and rel.suffix == ".pyc":
            source = rel.parent.parent / (rel.name.split(".")[0] + ".py")
            if (site / source).is_file():
                keep.add(str(source))
    for info in site.glob("*.dist-info"):
        record = info / "RECORD"
        named = {line.split(",")[0] for line in record.read_text().splitlines()} if (
            record.is_file()) else set()
        if named & keep and not info.name.startswith(WITHOUT):
            keep.update(str(p.relative_to(site)) for p in info.rglob("*") if p.is_file())
    return keep


def trace_count_run(folder: Path) -> set[Path]:
    """One count run of the quick suite under strace (which follows the count servers it
    starts): the files it opened."""
    if not shutil.which("strace"):
        raise SystemExit("strace is needed to see what a count run opens: apt-get install strace")
    log, traced = folder / "strace.log", folder / "strace-python"
    traced.write_text(f'#!/bin/sh\nexec strace -f -qq -e trace=%file -o {log} '
                      f'{sys.executable} "$@"\n')
    traced.chmod(0o755)
    counts(str(traced), {}, folder, "traced")
    return opened_files(log)


def stage(folder: Path, keep: set[str], own_libs: tuple[str, ...]) -> None:
    """folder/sp: the site-packages files to carry; folder/py: this Python's stdlib."""
    sp = folder / "sp"
    for rel in sorted(keep | set(own_libs)):
        (sp / rel).parent.mkdir(parents=True, exist_ok=True)
        src = SITE / rel
        with open(src, "rb") as f:
            elf = f.read(4) == b"\x7fELF"
        if elf:
            zero_device_code(src, sp / rel)
        else:
            shutil.copy2(src, sp / rel)
        shutil.copymode(src, sp / rel)
    base = Path(sys.base_prefix)
    lib = f"lib/python{sys.version_info.major}.{sys.version_info.minor}"

    def skip(directory: str, names: list[str]) -> list[str]:
        rel = Path(directory).relative_to(base)
        return [n for n in names if n.endswith(".a") or (rel == Path(lib) and (
            n in STDLIB_WITHOUT or n.startswith("config-"))) or (rel == Path(".") and n in (
            "include", "share"))]

    shutil.copytree(base, folder / "py", ignore=skip, symlinks=True)


def pack(out: Path, chunk_mb: int, level: int, own_libs: tuple[str, ...]) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        print("[carried_counts] tracing one count run", file=sys.stderr, flush=True)
        keep = site_files(trace_count_run(folder))
        print(f"[carried_counts] staging {len(keep)} files of site-packages and the stdlib",
              file=sys.stderr, flush=True)
        stage(folder, keep, own_libs)
        print(f"[carried_counts] compressing (zstd -{level})", file=sys.stderr, flush=True)
        subprocess.run(["bash", "-c", "set -o pipefail; tar -C \"$1\" -cf - sp py | zstd -q "
                        f"-{level} -T0 --long=30 | split -b {chunk_mb << 20} -d -a 2 - \"$2\"",
                        "pack", str(folder), str(out / "c")], check=True)
    zstd = Path(shutil.which("zstd"))
    shutil.copy2(zstd, out / "zstd")
    for lib in re.findall(r"=> (\S+)", subprocess.run(["ldd", str(zstd)], capture_output=True,
                                                       text=True).stdout):
        if "libc.so" not in lib:
            shutil.copy2(lib, out / Path(lib).name)  # in case the host lacks one
    (out / "run.sh").write_text(RUN_SH.replace("@PYTHON@", "python%d.%d" % sys.version_info[:2]))
    return sorted(out.glob("c[0-9][0-9]"))


def rehearse(kit: Path) -> int:
    """Unpack kit here as the host will, count once with the carried stack, and compare
    with a count run of this machine's own stack: the number of series that differ."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        carried, outf = folder / "carried", folder / "recorded.json"
        carried.mkdir()
        for chunk in kit.glob("c[0-9][0-9]"):
            shutil.copy2(chunk, carried)
        shutil.copy2(RECORDED, outf)
        subprocess.run(["bash", str(kit / "run.sh"), "rehearsal", "1", "rehearsal", str(outf)],
                       cwd=ROOT, check=True,
                       env={**os.environ, "CARRIED": str(carried), "NV": str(SITE / "nvidia")})
        carried_run = json.loads(outf.read_text())["machines"]["rehearsal"]["runs"][0]
        own_run, _ = counts(*NATIVE, folder, "own")
    return len(set(carried_run.items()) ^ set(own_run.items()))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="the folder to carry")
    parser.add_argument("--chunk-mb", type=int, default=30,
                        help="MiB per chunk (a device call carries 64 MiB, with our 30 MiB tree)")
    parser.add_argument("--level", type=int, default=19, help="zstd's level")
    parser.add_argument("--own-lib", action="append", default=list(OWN_LIBS),
                        help="a site-packages library to carry although the host has one")
    parser.add_argument("--rehearse", action="store_true",
                        help="unpack --out here as the host will and count once")
    args = parser.parse_args(argv)
    if not args.rehearse:
        chunks = pack(args.out, args.chunk_mb, args.level, tuple(args.own_lib))
        print(f"{len(chunks)} chunks in {args.out}: "
              f"{sum(c.stat().st_size for c in chunks) / 2**20:.0f} MiB")
        return 0
    differ = rehearse(args.out)
    print(f"rehearsal: {differ} series differ from this machine's own count run")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())

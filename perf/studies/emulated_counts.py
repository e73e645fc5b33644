"""``python -m perf.studies.emulated_counts --qemu PATH [--cpu Nehalem] [--native 5]
[--emulated 3] --out FILE``: the count tier on two machines of different speed, this one and
another x86-64 CPU emulated by qemu's user mode, with the same Python, torch and TensorRT.

Every run is a whole ``torch-trt-ref perf run --suite quick --tiers counts`` in new
processes. The emulated machine (default ``-cpu Nehalem``: no AVX, so torch's CPU capability
reads DEFAULT, not this machine's AVX2/AVX512) runs the same binaries about 10x slower; the
count servers the run starts go through the same emulation (a ``sitecustomize`` on the path
points ``sys.executable`` at a wrapper). After the counts, alone, each machine's canary (the
gate's fixed CPU loop, ``perf.gate.measure.canary``) says how far apart their speeds are.
The file holds every run's counts, each machine's canaries and capability; docs/
regressions.md, "Spread, measured", reports it and ``tests/test_perf_counts.py`` re-checks it.

``--again NAME --root DIR --out FILE`` (no qemu) adds to a recorded FILE the count runs and
canaries of the machine it runs on now, as the machine NAME: another boot or another host of
the kind, counting the library at DIR (a worktree at the commit FILE measured, since the
counts change with the code), with what identifies the boot (its id, kernel, boot time).
``--commit`` names that commit where DIR is a copy without git; on a host without this
machine's Python, torch and TensorRT, ``perf.studies.carried_counts`` brings them.

qemu 7.2 (Debian bookworm's ``qemu-user``) aborts a forked child that starts a thread while
another thread of its parent was alive (``qemu_plugin_vcpu_init_hook: assertion failed``),
which every count server's child does; 10.0 does not. Debian trixie's ``qemu-user`` carries
statically linked binaries: ``apt-get download`` it with a trixie source list and
``dpkg -x`` it into a folder; no install needed."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from perf.gate.suites import CANARY_SERIES, COLD_CANARY
from zoo.schema import cpu_model

ROOT = Path(__file__).resolve().parents[2]
NATIVE = (sys.executable, {})  # this machine's Python, run as it is (no emulation)
COUNTS = ("import sys; from torch_trt_ref.cli import main; "
          "sys.exit(main(['perf', 'run', '--suite', 'quick', '--tiers', 'counts', "
          "'--json', sys.argv[1]]))")
CANARY = ("import json, torch; from perf.gate import measure; "
          "print('@@' + json.dumps({'canary': measure.canary(), "
          "'capability': torch.backends.cpu.get_cpu_capability()}))")


def emulation(folder: Path, qemu: str, cpu: str) -> tuple[str, dict]:
    """A wrapper running this Python under ``qemu -cpu cpu``, and the environment that makes
    every Python it starts (``sys.executable``) go through the wrapper too."""
    wrapper = folder / "python"
    wrapper.write_text(f'#!/bin/sh\nexec {qemu} -cpu {cpu} {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    site = folder / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(f"import sys\nsys.executable = {str(wrapper)!r}\n")
    return str(wrapper), {"PYTHONPATH": f"{site}:{ROOT}"}


def _python(exe: str, env: dict, *args: str, root: Path = ROOT) -> str:
    done = subprocess.run([exe, *args], cwd=root, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(root), **env}, timeout=3600)
    if done.returncode:
        raise RuntimeError(f"{exe} {args[:1]} exited {done.returncode}:\n{done.stderr[-2000:]}")
    return done.stdout


def counts(exe: str, env: dict, folder: Path, tag: str, root: Path = ROOT
           ) -> tuple[dict, float]:
    """One whole count run of the library at root: {series: value} and its wall seconds."""
    out = folder / f"{tag}.json"
    start = time.perf_counter()
    _python(exe, env, "-c", COUNTS, str(out), root=root)
    series = {s["name"]: s["samples"][0] for s in json.loads(out.read_text())}
    return series, time.perf_counter() - start


def count_runs(exe: str, env: dict, folder: Path, name: str, n: int, root: Path = ROOT
               ) -> dict:
    """n whole count runs on the machine name, with progress: {runs, wall_s}."""
    runs, seconds = [], []
    for i in range(n):
        series, wall = counts(exe, env, folder, f"{name}{i}", root)
        runs.append(series)
        seconds.append(round(wall, 1))
        print(f"[emulated_counts] {name} run {i + 1}/{n}: {len(series)} series,"
              f" {wall:.0f} s", file=sys.stderr, flush=True)
    return {"runs": runs, "wall_s": seconds}


def canary(exe: str, env: dict, root: Path = ROOT) -> dict:
    for line in _python(exe, env, "-c", CANARY, root=root).splitlines():
        if line.startswith("@@"):
            found = json.loads(line[2:])
            return {"capability": found["capability"],
                    "canary": found["canary"][CANARY_SERIES]["value"],
                    "cold_canary": found["canary"][COLD_CANARY]["value"]}
    raise RuntimeError("the canary printed no result")


def identity() -> dict:
    """What tells this boot of this machine from another: the kernel's boot id, the kernel,
    when it booted, and the CPU as /proc/cpuinfo names it (a VM does not show its host)."""
    proc = Path("/proc/sys/kernel")
    uptime = float(Path("/proc/uptime").read_text().split()[0])
    booted = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(time.time() - uptime))
    return {"boot_id": (proc / "random" / "boot_id").read_text().strip(),
            "kernel": (proc / "osrelease").read_text().strip(), "booted": booted,
            "cpu": cpu_model(), "cores": os.cpu_count()}


def again(args) -> dict:
    """--again: this machine's count runs and canaries added to the recorded file."""
    root = args.root.resolve()
    result = json.loads(args.out.read_text())
    if args.again in result["machines"]:
        raise SystemExit(f"{args.out} already has a machine {args.again!r}: name another")
    commit = args.commit or subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
        capture_output=True, text=True, check=True).stdout.strip()
    machine = {"what": cpu_model(), "identity": identity(), "commit": commit}
    with tempfile.TemporaryDirectory() as tmp:
        machine.update(count_runs(*NATIVE, Path(tmp), args.again, args.native, root))
    machine["canaries"] = [canary(*NATIVE, root) for _ in range(args.canaries)]
    result["machines"][args.again] = machine
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--qemu", help="qemu-x86_64 binary (10.0 or newer); not with --again")
    parser.add_argument("--cpu", default="Nehalem", help="the emulated CPU model")
    parser.add_argument("--native", type=int, default=5, help="count runs on this machine")
    parser.add_argument("--emulated", type=int, default=3, help="count runs emulated")
    parser.add_argument("--canaries", type=int, default=3, help="canary processes each")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--canaries-only", action="store_true",
                        help="measure the canaries again into --out's recorded runs (on a "
                        "quiet machine: they are timings)")
    parser.add_argument("--again", metavar="NAME",
                        help="add this machine's --native count runs to --out as NAME")
    parser.add_argument("--root", type=Path, default=ROOT,
                        help="with --again: the library to count (a worktree at --out's commit)")
    parser.add_argument("--commit", help="with --again: the commit --root holds, where it is "
                        "a copy without git (a lent machine's copy of the working tree)")
    args = parser.parse_args(argv)
    if not (args.qemu or args.again):
        parser.error("--qemu is needed (a qemu-x86_64 10.0 binary), unless --again")
    result = again(args) if args.again else emulated(args)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    report(result)
    return 0


def emulated(args) -> dict:
    """The native and emulated count runs and canaries (or, --canaries-only, the canaries
    again into --out's recorded runs)."""
    version = subprocess.run([args.qemu, "--version"], capture_output=True, text=True,
                             check=True).stdout.splitlines()[0]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        exes = {"native": NATIVE,
                "emulated": emulation(folder, args.qemu, args.cpu)}
        if args.canaries_only:
            result, wanted = json.loads(args.out.read_text()), {}
        else:
            result = {"params": {"suite": "quick", "tiers": "counts", "qemu": version,
                                 "cpu": args.cpu},
                      "machines": {"native": {"what": cpu_model()},
                                   "emulated": {"what": f"{version}, -cpu {args.cpu}"}}}
            wanted = {"native": args.native, "emulated": args.emulated}
        for name, n in wanted.items():
            result["machines"][name].update(count_runs(*exes[name], folder, name, n))
        for name, exe in exes.items():  # alone, after every count run
            result["machines"][name]["canaries"] = [canary(*exe) for _ in range(args.canaries)]
    return result


def report(result: dict) -> None:
    """Per machine: its canary and capability; then the series whose counts differ."""
    values: dict[str, set] = {}
    for name, m in result["machines"].items():
        best = {k: min(c[k] for c in m["canaries"]) for k in ("canary", "cold_canary")}
        wall = f"{min(m['wall_s']):.0f}-{max(m['wall_s']):.0f} s"
        print(f"{name:9s} {m['what']}: capability {m['canaries'][0]['capability']}, canary "
              f"{best['canary']:.3f} s, cold {best['cold_canary']:.3f} s; {len(m['runs'])} runs "
              f"of {len(m['runs'][0])} series, {wall} each")
        for run in m["runs"]:
            for series, value in run.items():
                values.setdefault(series, set()).add(value)
    differ = sorted(s for s, v in values.items() if len(v) > 1)
    print(f"{len(values)} series, {len(differ)} with more than one value across every run"
          + (": " + ", ".join(differ) if differ else ""))


if __name__ == "__main__":
    raise SystemExit(main())

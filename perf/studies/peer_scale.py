"""``python -m perf.studies.peer_scale``: the whole compile of the ~3,400-node model (the deep,
narrow GPT2LMHeadModel of ``perf.bench.test_scale_bench``: 68 blocks of width 64, 128 tokens),
ours and Torch-TensorRT's on the same model, in fresh processes that alternate peer/project
(ABBA) in one run, as ``../shared/peer/side_by_side.py`` does for the four small models.

Each process builds the model (the same code on both sides), exports it once outside the
window, then compiles it (TensorRT build included) and reports wall seconds, build seconds,
seconds outside the builder (capture excluded on both sides) and peak RSS above the RSS
before the compile. The peer runs ``run_peer.full_compile`` (min_block_size 5) in its venv
(``$PEER_VENV``); a peer that fails reports where it stopped (its error and traceback tail).
``--out`` writes every sample as JSON (perf-data/results/peer_scale_issue25.json)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CHILD = r"""
import gc, json, os, sys, threading, time, warnings
warnings.filterwarnings("ignore")
side, layers, peer_dir = sys.argv[1], int(sys.argv[2]), sys.argv[3]
width, heads = int(sys.argv[4]), int(sys.argv[5])
sys.path.insert(0, peer_dir)
import psutil, torch, transformers
transformers.logging.set_verbosity_error()
torch.manual_seed(0)
config = transformers.GPT2Config(n_layer=layers, n_embd=width, n_head=heads, vocab_size=1024,
                                 n_positions=256, use_cache=False)
model = transformers.GPT2LMHeadModel(config).eval()
ids = torch.randint(0, 1024, (1, 128), generator=torch.Generator().manual_seed(0))

class Plain(torch.nn.Module):  # logits only, as run_peer's transformers wrappers
    def __init__(self, inner):
        super().__init__()
        self.inner = inner
    def forward(self, x):
        return self.inner(x, use_cache=False, return_dict=False)[0]

model = Plain(model).eval()
proc = psutil.Process()
if side == "peer":
    import run_peer
    run_peer._setup()
    res = run_peer.full_compile(model, (ids,), 5)
    out = {"ok": res["ok"], "error": res["error"], "traceback": res.get("traceback_tail"),
           "wall": res["compile_wall_s"], "build": res["build_s"],
           "engines": res.get("engines_built"),
           "peak_mib": res.get("peak_rss_delta_bytes", 0) / 2**20}
    out["outside"] = out["wall"] - out["build"]
else:
    import torch_trt_ref
    with torch.no_grad():
        torch.export.export(model, (ids,))
    gc.collect()
    base = peak = proc.memory_info().rss
    stop = False
    def watch():
        global peak
        while not stop:
            peak = max(peak, proc.memory_info().rss)
            time.sleep(0.005)
    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    start = time.perf_counter()
    compiled = torch_trt_ref.compile(model, [ids])
    wall = time.perf_counter() - start
    stop = True
    thread.join()
    report = compiled.compile_report
    phases = report.phases
    out = {"ok": True, "wall": wall, "build": phases.get("build", 0.0),
           "capture": phases.get("capture", 0.0), "phases": dict(phases),
           "phases_cpu": dict(report.phases_cpu), "engines": len(report.engines),
           "peak_mib": (peak - base) / 2**20}
    out["outside"] = wall - out["build"] - out["capture"]
    out["outside_with_capture"] = wall - out["build"]
print("@@" + json.dumps(out))
"""


def sample(side: str, python: str, layers: int, peer_dir: Path, timeout: int, width: int = 64,
           heads: int = 2) -> dict:
    """One fresh process compiling the model on ``side`` ("peer" or "project")."""
    env = dict(os.environ)
    if side == "project":
        env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run([python, "-c", CHILD, side, str(layers), str(peer_dir), str(width),
                          str(heads)],
                         capture_output=True, text=True, env=env,
                         cwd=ROOT if side == "project" else peer_dir, timeout=timeout)
    for line in out.stdout.splitlines():
        if line.startswith("@@"):
            return {"side": side, **json.loads(line[2:])}
    return {"side": side, "ok": False, "error": (out.stderr or out.stdout)[-1500:]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m perf.studies.peer_scale", description=__doc__)
    parser.add_argument("--peer-dir", type=Path, default=ROOT.parent / "shared" / "peer",
                        help="directory of run_peer.py (default: ../shared/peer)")
    parser.add_argument("--layers", type=int, default=68,
                        help="GPT-2 blocks (68: ~3,400 lowered nodes)")
    parser.add_argument("--width", type=int, default=64,
                        help="n_embd (64 as perf.bench.test_scale_bench; TensorRT-RTX 1.5 fails to "
                             "build widths 64-256 of this model for the peer, 512 builds)")
    parser.add_argument("--heads", type=int, default=2, help="attention heads")
    parser.add_argument("--rounds", type=int, default=2, help="processes per side")
    parser.add_argument("--timeout", type=int, default=3600, help="seconds per process")
    parser.add_argument("--out", type=Path, help="write every sample here as JSON")
    args = parser.parse_args(argv)
    if not (args.peer_dir / "run_peer.py").is_file():
        parser.error(f"--peer-dir {args.peer_dir}: no run_peer.py there")
    peer_venv = os.environ.get("PEER_VENV", os.path.expanduser("~/.cache/torch-trt-peer-venv"))
    pythons = {"peer": os.path.join(peer_venv, "bin", "python"), "project": sys.executable}
    if not os.path.exists(pythons["peer"]):
        parser.error(f"no peer venv at {peer_venv} (set PEER_VENV; ../shared/peer/setup.sh)")
    rows = []
    for r in range(args.rounds):
        for side in ("peer", "project") if r % 2 == 0 else ("project", "peer"):
            print(f"[peer_scale] round {r + 1}/{args.rounds}: {side} ...", file=sys.stderr,
                  flush=True)
            row = {"round": r, **sample(side, pythons[side], args.layers, args.peer_dir,
                                        args.timeout, args.width, args.heads)}
            print(json.dumps(row), flush=True)
            rows.append(row)
    if args.out:
        args.out.write_text(json.dumps({"layers": args.layers, "width": args.width,
                                         "heads": args.heads, "rows": rows}, indent=1) + "\n")
    print(table(rows))
    return 0


def table(rows: list[dict]) -> str:
    """Best (min) of each side: wall, build, outside the builder, peak RSS."""
    lines = ["| side | compile wall s | build s | outside builder s | peak MiB | engines |",
             "|---|---|---|---|---|---|"]
    for side in ("peer", "project"):
        ok = [r for r in rows if r["side"] == side and r.get("ok")]
        if not ok:
            failed = next((r for r in rows if r["side"] == side), {})
            lines.append(f"| {side} | failed: {str(failed.get('error'))[:200]} | | | | |")
            continue
        lines.append(f"| {side} | {min(r['wall'] for r in ok):.1f} | "
                     f"{min(r['build'] for r in ok):.1f} | "
                     f"{min(r['outside'] for r in ok):.2f} | "
                     f"{min(r['peak_mib'] for r in ok):.0f} | {ok[0].get('engines')} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())

"""A measuring server: imports the library once (and builds what its groups need), then
forks one fresh child per measurement, so each sample is a cold compile in a new process
without paying ~4 s of imports. ``Pool`` runs these servers for one source tree: the
library of ``tree`` with the measurement code (perf, zoo, conformance) of this checkout.

Protocol: one JSON request per line on stdin (``{"group", "inject", "cases"}`` or ``{"op":
"groups"}``), one JSON reply per line on the original stdout; the server's own stdout goes
to stderr so nothing the library prints can corrupt a reply. When a server dies, the end of
its stderr goes into the error (CI keeps no log)."""

from __future__ import annotations

import contextlib
import gc
import importlib.machinery
import json
import os
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

from .suites import server_kind

ROOT = Path(__file__).resolve().parents[2]  # the repository: perf/gate/ is two below it
# glibc raises its mmap threshold each time a large mmapped block is freed (up to 32 MiB), so
# a server's allocation history decided whether its children's big tensors came from fresh
# pages or from heap it had already touched: peak RSS differed by 5-17% from one server to the
# next (resnet18 200 vs 210 MiB, bert_2layer 111 vs 131 MiB; 6 servers x 3 processes, 90-100%
# of the variance between servers). Pinned at glibc's default (which turns the adjustment
# off) the servers agree: resnet18 207.5-208.1 MiB, bert_2layer 153.9-162.5 (docs/regressions.md)
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": str(128 * 1024)}
# Note [A server sees no GPU]: every gated series is a CPU series (".../cpu"), and a server
# forks its measurements. On a machine with a GPU (the lent H200 host, session 57), a server
# whose library had asked torch about CUDA left children that could not use it ("Cannot
# re-initialize CUDA in forked subprocess": each compile asks for the GPU's compute
# capability), so the count run died; and a visible GPU would change which executor a compile
# picks, so the counts would depend on the machine. Servers are started with no GPU visible.
NO_GPU_ENV = {"CUDA_VISIBLE_DEVICES": ""}
STDERR_LINES = 15  # of a dead server's stderr, shown in the error


def _child(group: str, prepared: dict, spec: dict | None, cases: list[str] | None,
           fd: int) -> None:
    from . import measure  # imported by the server before it forks: no cost here

    try:
        reply = {"group": group, "series": measure.measure(group, prepared, spec, cases)}
    except Exception as err:  # noqa: BLE001  (reported to the client)
        reply = _error(group, err)
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps(reply))


def _error(group: str, err: Exception) -> dict:
    """The reply for a measurement that raised (call from its ``except`` block)."""
    return {"group": group, "error": f"{type(err).__name__}: {err}",
            "traceback": traceback.format_exc()}


def fork_measure(group: str, prepared: dict, spec: dict | None,
                 cases: list[str] | None = None) -> dict:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: measure, reply through the pipe, exit without cleanup
        os.close(read)
        code = 0
        try:
            _child(group, prepared, spec, cases, write)
        except BaseException:  # noqa: BLE001
            code = 1
        os._exit(code)
    os.close(write)
    with os.fdopen(read) as f:
        text = f.read()
    _, status = os.waitpid(pid, 0)
    if not text:
        return {"group": group, "error": f"measuring process died (wait status {status})"}
    return json.loads(text)


class _OwnLibraryOnly:
    """A meta path finder that finds ``torch_trt_ref``'s modules on the path alone (Note
    [One library per server])."""

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] != "torch_trt_ref":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None:
            raise ModuleNotFoundError(f"No module named {name!r} in the library measured "
                                      "here", name=name)
        return spec


# Note [One library per server]: a measuring server of another tree has that tree's library
# first on its path, but this checkout's editable install also puts a finder on
# sys.meta_path that maps this checkout's modules by name; a module the other tree lacks
# (torch_trt_ref.llm before it existed) was then imported from this checkout, on the other
# tree's runtime. So a server finds the library's modules on the path only: a module the
# measured tree lacks is missing, and the group that needs it says so (tests/
# test_perf_confirm.py).


def serve(kind: str, models: list[str] | None = None, families: bool = True) -> None:
    import warnings

    warnings.simplefilter("ignore")
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # anything printed goes to stderr
    sys.meta_path.insert(0, _OwnLibraryOnly())
    import torch

    torch.set_num_threads(1)
    import torch_trt_ref  # noqa: F401  (imported once, before every fork)

    from . import measure

    prepared: dict = {"tier": "counts" if kind == COUNTS else "time"}
    groups = {"families": [], "cases": {}, "skipped": {}, "library": torch_trt_ref.__file__}
    if kind == COUNTS:  # Note [What a count server holds]
        for group in models or []:  # groups ("compile:resnet18", "llm:gpt2") or models
            _warm(group if ":" in group else f"compile:{group}", prepared)
    if kind == "families" or (kind == COUNTS and families):
        from .families import SKIPPED

        prepared["families"] = measure.load_family_graphs()
        groups.update(families=sorted(prepared["families"]), skipped=SKIPPED,
                      cases={f: [g[0] for g in graphs]
                             for f, graphs in prepared["families"].items()})
    _freeze()
    for line in sys.stdin:
        request = json.loads(line)
        if request.get("op") == "groups":
            reply = groups
        else:
            reply = _warm(request["group"], prepared) or fork_measure(
                request["group"], prepared, request.get("inject"), request.get("cases"))
        replies.write(json.dumps(reply) + "\n")
        replies.flush()


# Note [What a count server holds]: a forked child's counts of torch's code depend on what its
# server did before the fork (torch's caches: lgamma_graph's capture made 16803 calls into
# torch in a server that had built only that model, 16891 in one that had built all four of
# the quick suite). So a count server builds every model of its suite, in the suite's order,
# then the family graphs, and only then forks; every child starts from the same state.
COUNTS = "counts"


def _freeze() -> None:
    gc.collect()
    gc.freeze()  # forked children share these objects; their collections skip them


def _warm(group: str, prepared: dict) -> dict | None:
    """Before the first fork for a model, build it once in the server, so its imports
    (transformers, torchvision) and first-use costs are paid here, not in a measured child;
    only the models a run asks for are built (a server is opened every round). Returns an
    error reply when the model cannot be built."""
    kind, _, name = group.partition(":")
    warm = prepared.setdefault("warm", set())
    if kind not in ("compile", "llm") or group in warm:
        return None
    try:
        if kind == "llm":
            from torch_trt_ref.llm.models import build

            build(name)
        else:
            from zoo.registry import get

            get(name).factory()
    except Exception as err:  # noqa: BLE001  (reported to the client)
        return _error(group, err)
    warm.add(group)
    _freeze()
    return None


class MeasureError(RuntimeError):
    pass


def server_env(kind: str, pythonpath: str) -> dict[str, str]:
    """The environment of a ``kind`` server: malloc pinned, no GPU (Note [A server sees no
    GPU]), the library first on the path, and for counts a fixed hash seed."""
    return {**os.environ, **MALLOC_ENV, **NO_GPU_ENV, "PYTHONPATH": pythonpath,
            **({"PYTHONHASHSEED": "0"} if kind == COUNTS else {})}


class Pool:
    """Measuring servers for the library of ``tree`` (default: this checkout), started on
    first use, one per server kind."""

    kind: str | None = None  # the one server kind of every group (None: by group)
    models: tuple[str, ...] = ()  # what a count server builds before its first fork
    with_families = True  # a count server builds the family graphs too

    def __init__(self, tree: Path | None = None, log: Path | None = None):
        self.tree = Path(tree or ROOT).resolve()
        self.log = log
        self._servers: dict[str, subprocess.Popen] = {}
        self._groups: dict[str, dict] = {}  # each server's "groups" reply
        self._scratch: tempfile.TemporaryDirectory | None = None

    def _folder(self) -> Path:
        """A temporary folder for the import shim and the servers' stderr."""
        self._scratch = self._scratch or tempfile.TemporaryDirectory(prefix="perf-pool-")
        return Path(self._scratch.name)

    def _pythonpath(self) -> str:
        if self.tree == ROOT:
            return str(ROOT)
        # the other tree's library, this checkout's measurement code (perf, zoo, ...)
        shim = self._folder() / "shim"
        shim.mkdir(exist_ok=True)
        link = shim / "torch_trt_ref"
        if not link.exists():
            link.symlink_to(self.tree / "torch_trt_ref")
        return f"{shim}{os.pathsep}{ROOT}"

    def _stderr(self, kind: str) -> Path:
        return self.log or self._folder() / f"{kind}.stderr"

    def _server(self, kind: str) -> subprocess.Popen:
        if kind not in self._servers:
            path = self._pythonpath()
            env = server_env(kind, path)
            with open(self._stderr(kind), "a") as err:
                # ``python -m`` puts its working directory first on sys.path: run in the
                # first PYTHONPATH entry, so the library imported is the one that entry holds
                server = subprocess.Popen(
                    [sys.executable, "-m", "perf.gate.worker", kind, ",".join(self.models),
                     "families" if self.with_families else "no-families"],
                    cwd=path.split(os.pathsep)[0], env=env, text=True,
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
            self._servers[kind] = server
            try:
                self._groups[kind] = self._ask(kind, {"op": "groups"})
            except MeasureError:  # it died starting: the next call starts a new one
                del self._servers[kind]
                raise
            library = Path(self._groups[kind]["library"]).resolve()
            if not library.is_relative_to(self.tree):
                raise MeasureError(f"the {kind} measuring server for {self.tree} imported "
                                   f"the library at {library}")
        return self._servers[kind]

    def _ask(self, kind: str, request: dict) -> dict:
        server = self._server(kind)
        try:
            server.stdin.write(json.dumps(request) + "\n")
            server.stdin.flush()
            line = server.stdout.readline()
        except BrokenPipeError:  # it died after an earlier request
            line = ""
        if not line:
            tail = self._stderr(kind).read_text(errors="replace").splitlines()[-STDERR_LINES:]
            raise MeasureError(f"the {kind} measuring server of {self.tree} exited (code "
                               f"{server.wait()}); the end of its stderr:\n"
                               + "\n".join(tail))
        return json.loads(line)

    def _families_info(self) -> dict:
        """The families server's "groups" reply (starting the server if need be)."""
        kind = self.kind or "families"
        self._server(kind)
        return self._groups[kind]

    def families(self) -> list[str]:
        return self._families_info()["families"]

    def family_cases(self, family: str) -> list[str]:
        """The case ids of ``family`` whose graphs this tree built (none: it has no such
        family); ``skipped_cases`` says which case modules its library could not import."""
        return self._families_info()["cases"].get(family, [])

    def skipped_cases(self) -> dict[str, str]:
        return self._families_info()["skipped"]

    def measure(self, group: str, inject: dict | None = None,
                cases: list[str] | None = None) -> dict[str, dict]:
        """The series of one fresh process measuring ``group`` (``cases``: of a family,
        only these case ids)."""
        reply = self._ask(self.kind or server_kind(group), {"group": group, "inject": inject,
                                               "cases": cases})
        if "error" in reply:
            raise MeasureError(f"{group} on {self.tree}: {reply['error']}\n"
                               f"{reply.get('traceback', '')}")
        return reply["series"]

    def close(self) -> None:
        for server in self._servers.values():
            with contextlib.suppress(BrokenPipeError):  # a server that died
                server.stdin.close()
            server.wait()
        self._servers.clear()
        self._groups.clear()
        if self._scratch:
            self._scratch.cleanup()
            self._scratch = None

    def __enter__(self) -> "Pool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class CountPool(Pool):
    """The count tier's server for the library of ``tree`` (perf/gate/counting.py): one server
    measures every group, after building ``models`` (the suite's groups to build:
    ``Suite.built``) and the family graphs."""

    kind = COUNTS

    def __init__(self, tree: Path | None = None, log: Path | None = None,
                 models: tuple[str, ...] = (), families: bool = True):
        super().__init__(tree, log)
        self.models = tuple(models)
        self.with_families = families


if __name__ == "__main__":
    serve(sys.argv[1], [m for m in sys.argv[2:3] for m in m.split(",") if m],
          sys.argv[3:4] != ["no-families"])

"""A compiled module owns its weights, as an engine does (design D11): ``own_weights``
replaces every tensor that shares storage with the caller's parameters, buffers or
constants by a private copy (``storages_of`` names the caller's storages)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy
import torch


# -- ownership --------------------------------------------------------------------------
def own_weights(module: torch.nn.Module, foreign: set[int], snapshots=()) -> int:
    """Replace every tensor of ``module`` (parameters, buffers, tensor attributes) and of
    the network ``snapshots`` whose storage is in ``foreign`` (storage addresses of the
    caller's tensors) by a view of a private copy of that storage; views of one storage
    stay views of one copy. Returns the number of bytes copied."""
    places = []  # (table, key, tensor): where each foreign tensor is held
    with torch.no_grad():
        for sub in module.modules():
            for table in (sub._parameters, sub._buffers):
                places += [(table, name, value) for name, value in table.items()
                           if value is not None]
            places += [(vars(sub), name, value) for name, value in list(vars(sub).items())
                       if isinstance(value, torch.Tensor)]
        for snapshot in snapshots:
            for layer in snapshot.layers:
                places += [(layer.attrs, name, value) for name, value in layer.attrs.items()
                           if isinstance(value, torch.Tensor)]
        places = [p for p in places if _is_foreign(p[2], foreign)]
        storages = {}
        for _, _, tensor in places:
            storages.setdefault(tensor.untyped_storage().data_ptr(), tensor.untyped_storage())
        copies = dict(zip(storages, _clone_all(list(storages.values()))))
        for table, name, tensor in places:
            table[name] = _view_of(copies[tensor.untyped_storage().data_ptr()], tensor)
    return sum(s.nbytes() for s in copies.values())


def _is_foreign(t: torch.Tensor, foreign: set[int]) -> bool:
    if t.device.type == "meta":
        return False
    storage = t.untyped_storage()
    return bool(storage.nbytes()) and storage.data_ptr() in foreign


def _view_of(storage: torch.UntypedStorage, t: torch.Tensor) -> torch.Tensor:
    """``t``'s view (offset, shape, strides) of ``storage``; a Parameter stays one."""
    new = torch.empty(0, dtype=t.dtype, device=t.device).set_(
        storage, t.storage_offset(), t.shape, t.stride())
    if isinstance(t, torch.nn.Parameter):
        return torch.nn.Parameter(new, requires_grad=t.requires_grad)
    return new


# Note [Parallel weight copy]
# Copying a model's weights costs little memory bandwidth and much page allocation: each
# fresh 4 KiB page is a fault the kernel serves (zeroed, charged, mapped), ~0.35 ms per MiB
# on the 2-core CI machine against ~0.07 ms per MiB for the memcpy itself (BERT-base's
# 416 MiB: 0.15 s of CPU, issue 25). Faults in different allocations are served in
# parallel (the kernel locks per mapping), so above ``_PARALLEL_BYTES`` the storages are
# copied by up to ``torch.get_num_threads()`` (at most 4) threads, largest first. The CPU
# time is the same; the wall time falls with the cores (2 cores: 0.15 -> 0.08 s). Each
# thread takes one share, balanced by bytes (one task per storage cost 2 ms of hand-offs
# on BERT-base's 197). numpy's copy releases the GIL. torch's own ``clone`` is not used: it
# splits each copy over its OpenMP pool, whose start and spin-wait cost ten times a small
# copy's CPU.
_PARALLEL_BYTES = 64 * 2**20
_MAX_COPY_THREADS = 4


def _clone_all(storages: list) -> list:
    """Copies of ``storages``, in order (Note [Parallel weight copy])."""
    threads = min(torch.get_num_threads(), _MAX_COPY_THREADS, len(storages))
    if threads < 2 or sum(s.nbytes() for s in storages) < _PARALLEL_BYTES:
        return [_clone(s) for s in storages]
    shares: list[list[int]] = [[] for _ in range(threads)]
    loads = [0] * threads
    for i in sorted(range(len(storages)), key=lambda i: -storages[i].nbytes()):
        least = loads.index(min(loads))  # largest first, each to the least loaded share
        shares[least].append(i)
        loads[least] += storages[i].nbytes()

    def copy_share(share: list[int]) -> list:
        return [(i, _clone(storages[i])) for i in share]

    with ThreadPoolExecutor(threads, thread_name_prefix="torch_trt_ref_copy") as pool:
        copies = dict(pair for part in pool.map(copy_share, shares) for pair in part)
    return [copies[i] for i in range(len(storages))]


def _clone(storage: torch.UntypedStorage) -> torch.UntypedStorage:
    """A copy of ``storage``. On the CPU one memcpy by numpy (Note [Parallel weight
    copy]: torch's copy would start its OpenMP pool)."""
    if storage.device.type != "cpu":
        return storage.clone()
    copy = torch.empty(storage.nbytes(), dtype=torch.uint8)
    numpy.copyto(copy.numpy(), torch.empty(0, dtype=torch.uint8).set_(storage).numpy())
    return copy.untyped_storage()


def storages_of(tensors) -> set[int]:
    """Storage addresses of ``tensors`` (an iterable), for ``own_weights``."""
    return {t.untyped_storage().data_ptr() for t in tensors
            if isinstance(t, torch.Tensor) and t.device.type != "meta"}

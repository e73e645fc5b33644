"""perf/studies/carried_counts.py: the GPU code of a real library is zeroed with every header
kept and nothing else touched, a library whose fatbins do not add up is refused, and the
site-packages files carried are the ones a run opened, their sources and their metadata."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
import torch

from perf.studies.carried_counts import DEVICE_CODE, FATBIN_MAGIC, site_files, zero_device_code

LIBRARY = Path(torch.__file__).parent / "lib" / "libtorch_nvshmem.so"  # 4 MB, 0.46 MB of GPU code


def _sections(data: bytes) -> dict[str, tuple[int, int]]:
    """{name: (offset, size)} of the GPU code sections, read with readelf's layout."""
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    entsize, count, names_at = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * entsize) for i in range(count)]
    names = headers[names_at][4]
    found = {data[names + h[0]:data.index(b"\0", names + h[0])].decode(): (h[4], h[5])
             for h in headers}
    return {n: found[n] for n in DEVICE_CODE if n in found}


def _magics(data: bytes, start: int, size: int) -> int:
    return data[start:start + size].count(struct.pack("<I", FATBIN_MAGIC))


@pytest.mark.skipif(not LIBRARY.exists(), reason="torch without CUDA libraries")
def test_zeroing_keeps_headers_and_everything_outside_the_gpu_code(tmp_path):
    before = LIBRARY.read_bytes()
    sections = _sections(before)
    assert ".nv_fatbin" in sections
    zeroed = zero_device_code(LIBRARY, tmp_path / "lib.so")
    after = bytearray((tmp_path / "lib.so").read_bytes())
    assert len(after) == len(before)
    for start, size in sections.values():
        assert _magics(after, start, size) == _magics(before, start, size) > 0  # headers kept
        assert after[start:start + size].count(0) >= 0.9 * size
        after[start:start + size] = before[start:start + size]
    assert after == before  # nothing outside the GPU code changed
    assert 0.9 * sum(size for _, size in sections.values()) < zeroed
    assert zero_device_code(tmp_path / "lib.so", tmp_path / "again.so") == zeroed


@pytest.mark.skipif(not LIBRARY.exists(), reason="torch without CUDA libraries")
@pytest.mark.parametrize("at,fmt,change", [
    (8, "<Q", lambda size: size + 8),  # the first fatbin claims 8 bytes more than it has
    (6, "<H", lambda size: 0),  # a fatbin header of no size: the walk would stand still
    (16 + 4, "<I", lambda size: 0)])  # its first entry's header of no size, likewise
def test_a_fatbin_that_does_not_add_up_is_refused(tmp_path, at, fmt, change):
    data = bytearray(LIBRARY.read_bytes())
    start, _ = _sections(bytes(data))[".nv_fatbin"]
    struct.pack_into(fmt, data, start + at, change(struct.unpack_from(fmt, data, start + at)[0]))
    (tmp_path / "bad.so").write_bytes(bytes(data))
    with pytest.raises(ValueError, match="does not add up"):
        zero_device_code(tmp_path / "bad.so", tmp_path / "out.so")
    assert not (tmp_path / "out.so").exists()


def test_carried_files_are_the_opened_ones_with_sources_and_metadata(tmp_path):
    site = tmp_path / "site-packages"
    files = {"pkg/__init__.py": "", "pkg/mod.py": "", "pkg/__pycache__/mod.cpython-311.pyc": "",
             "pkg/unused.py": "", "pkg-1.0.dist-info/RECORD": "pkg/mod.py,,\n",
             "pkg-1.0.dist-info/METADATA": "", "other-2.0.dist-info/RECORD": "other.py,,\n",
             "nvidia/cu13/lib/libcudart.so.13": "", "triton/__init__.py": ""}
    for rel, text in files.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text)
    opened = {site / p for p in ("pkg/__init__.py", "pkg/__pycache__/mod.cpython-311.pyc",
                                 "nvidia/cu13/lib/libcudart.so.13", "triton/__init__.py")}
    opened.add(tmp_path / "elsewhere.py")
    assert site_files(opened, site) == {
        "pkg/__init__.py", "pkg/__pycache__/mod.cpython-311.pyc", "pkg/mod.py",
        "pkg-1.0.dist-info/RECORD", "pkg-1.0.dist-info/METADATA"}

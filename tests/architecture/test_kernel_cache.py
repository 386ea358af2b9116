"""The compiled loop's Numba cache follows every source file the kernels read, not only their own."""
from __future__ import annotations


def test_kernel_cache_dropped_when_a_source_it_reads_changes(tmp_path):
    """Numba keys a cached kernel by its own file only: a change to batch_layout.py or batch_memory.py drops the
    cached kernels (a stale digest), an unchanged set keeps them."""
    from opsim.fastpath.batch import _KERNEL_SOURCES, refresh_kernel_cache
    for name in _KERNEL_SOURCES:
        (tmp_path / name).write_text(f"# {name}\n")
    cache = tmp_path / "__pycache__"
    cache.mkdir()
    cached = cache / "batch_kernel.run-1.py311.nbi"
    cached.write_bytes(b"x")
    assert refresh_kernel_cache(tmp_path) and not cached.exists()
    cached.write_bytes(b"x")
    assert not refresh_kernel_cache(tmp_path) and cached.exists()
    (tmp_path / "batch_layout.py").write_text("X = 2\n")
    assert refresh_kernel_cache(tmp_path) and not cached.exists()

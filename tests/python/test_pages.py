"""The TF1 loader's zero pages (embstore._native): all-zero pages of private anonymous memory go
back to the kernel (release_zero_pages) or move into a new array (take_zero_pages, which releases
them where they cannot move), and the old buffer still reads as it did; anything else is left
alone."""
import mmap
import resource

import numpy as np

import pytest

from embstore._native import release_zero_pages, starts_with_zero_pages, take_zero_pages

MIB = 1 << 20
_BLOCK = 2 * MIB  # moved and released in blocks of this size


def zero_pages_into(donor, shape, dtype):
    """take_zero_pages as the TF1 loader uses it: an array of `shape` and `dtype`, or None."""
    dtype = np.dtype(dtype)
    pages = take_zero_pages(donor, int(np.prod(shape)) * dtype.itemsize)
    return None if pages is None else pages.view(dtype).reshape(shape)


def rss_bytes():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) * 1024


def resident_pages(array):
    """How many of the pages under `array` are resident (mincore through mmap is not exposed:
    read /proc/self/smaps' Rss of the mappings that overlap the buffer instead)."""
    start, end = array.ctypes.data, array.ctypes.data + array.nbytes
    total, inside = 0, False
    for line in open("/proc/self/smaps"):
        head = line.split()[0]
        if "-" in head and not head.endswith(":"):
            lo, hi = (int(x, 16) for x in head.split("-"))
            inside = lo < end and hi > start
        elif inside and head == "Rss:":
            total += int(line.split()[1]) * 1024
    return total


def test_zero_buffer_is_released_and_still_reads_zeros():
    a = np.ones(64 * MIB // 4, np.float32)
    a[:] = 0  # written: every page resident
    before = rss_bytes()
    released = release_zero_pages(a)
    assert released >= a.nbytes - 2 * mmap.PAGESIZE
    assert before - rss_bytes() >= 48 * MIB
    assert not a.any()
    a[123] = 5  # still ordinary writable memory
    assert a[123] == 5 and a.sum() == 5


def test_stops_at_the_first_block_that_is_not_zero():
    a = np.zeros(32 * MIB // 8, np.float64)
    a[:] = 0
    a[len(a) // 2 + 1000] = 1.5
    a[-1] = -2.0
    released = release_zero_pages(a)
    assert 0 < released <= a.nbytes // 2
    assert released % _BLOCK == 0
    assert a[len(a) // 2 + 1000] == 1.5 and a[-1] == -2.0
    assert np.count_nonzero(a) == 2


def test_nonzero_buffer_is_untouched():
    a = np.full(16 * MIB // 4, 0.25, np.float32)
    assert not starts_with_zero_pages(a)
    assert release_zero_pages(a) == 0
    assert (a == 0.25).all()
    z = np.zeros(16 * MIB // 4, np.float32)
    z[:] = 0
    assert starts_with_zero_pages(z)
    assert not starts_with_zero_pages(z[::2])


def test_small_or_strided_buffers_are_left_alone():
    small = np.zeros(_BLOCK // 8, np.float32)
    assert release_zero_pages(small) == 0
    big = np.zeros((4096, 2048), np.float32)
    assert release_zero_pages(big[:, ::2]) == 0


def test_file_backed_private_mapping_is_left_alone(tmp_path):
    # Released pages of a private file mapping would read the file again, not zeros: the file
    # holds ones, the mapping was zeroed in memory, and must stay zero.
    path = tmp_path / "ones.bin"
    np.ones(16 * MIB // 4, np.float32).tofile(path)
    m = np.memmap(path, dtype=np.float32, mode="c")
    m[:] = 0
    assert release_zero_pages(m) == 0
    assert not m.any()
    assert resident_pages(m) >= 15 * MIB
    del m


def isolated(shape, dtype):
    """A new array in a private anonymous mapping of its own, between two PROT_NONE pages: the
    kernel merges nothing else into its mapping, so resident_pages() counts this array alone
    (an ordinary array's mapping may take in the interpreter's other allocations, which made
    the checks below flaky in a full test run)."""
    import ctypes
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape)) * dtype.itemsize
    page = mmap.PAGESIZE
    assert nbytes % page == 0
    m = mmap.mmap(-1, nbytes + 2 * page, flags=mmap.MAP_PRIVATE)
    base = ctypes.addressof(ctypes.c_char.from_buffer(m))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    for guard in (base, base + page + nbytes):
        assert libc.mprotect(guard, page, 0) == 0, ctypes.get_errno()
    return np.frombuffer(m, np.uint8, count=nbytes, offset=page).view(dtype).reshape(shape)


def minor_faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def moved_or_skip(donor, shape, dtype):
    out = zero_pages_into(donor, shape, dtype)
    if out is None:
        pytest.skip("this kernel cannot move pages (MREMAP_DONTUNMAP needs Linux 5.7)")
    return out


def test_zero_pages_move_into_a_new_array_that_needs_no_new_memory():
    donor = isolated((4096, 4096), np.float32)
    donor[:] = 0  # written: every page resident
    before = rss_bytes()
    out = moved_or_skip(donor, (2048, 8192), np.float32)
    assert out.shape == (2048, 8192) and out.dtype == np.float32
    assert out.flags.c_contiguous and out.flags.writeable and out.ctypes.data % mmap.PAGESIZE == 0
    faults = minor_faults()
    out[:] = 7.0  # the moved pages are already there: filling them faults next to nothing in
    assert minor_faults() - faults < 64
    assert rss_bytes() - before < 8 * MIB
    assert (out == 7.0).all()
    # The donor still reads zeros, from pages it no longer holds, and is still writable.
    assert resident_pages(donor) < 2 * MIB
    assert not donor.any()
    donor[5, 5] = 1.0
    assert donor.sum() == 1.0 and (out == 7.0).all()
    del out  # unmaps the moved pages


def test_only_the_zero_prefix_moves_and_the_donor_keeps_its_values():
    donor = isolated((32 * MIB // 8,), np.float64)
    donor[:] = 0
    donor[len(donor) // 2 + 1000] = 1.5
    donor[-1] = -2.0
    out = moved_or_skip(donor, (len(donor),), np.float64)
    out[:] = 3.0
    assert (out == 3.0).all()
    assert donor[len(donor) // 2 + 1000] == 1.5 and donor[-1] == -2.0
    assert np.count_nonzero(donor) == 2
    # The second half kept its pages; the first half's moved.
    assert 15 * MIB <= resident_pages(donor) <= 17 * MIB


def test_no_move_from_nonzero_small_or_file_backed_buffers(tmp_path):
    assert zero_pages_into(np.full(16 * MIB // 4, 0.25, np.float32), (16 * MIB // 4,),
                           np.float32) is None
    assert zero_pages_into(np.zeros(_BLOCK // 8, np.float32), (_BLOCK // 8,), np.float32) is None
    path = tmp_path / "ones.bin"
    np.ones(16 * MIB // 4, np.float32).tofile(path)
    m = np.memmap(path, dtype=np.float32, mode="c")
    m[:] = 0
    assert zero_pages_into(m, m.shape, m.dtype) is None
    assert not m.any()
    del m

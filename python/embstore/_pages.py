"""Returning a buffer's all-zero pages to the kernel, or moving them into a new buffer.

TensorFlow's graph optimizer folds a large zeros initializer into a constant that the session
keeps for its life, and a resource variable initialized from it shares the constant's buffer. The
first write into the variable then copies it, and the constant's pages stay resident: a second
variable's worth of memory that nobody reads again. Those pages hold only zeros, and a private
anonymous page released with madvise(MADV_DONTNEED) reads back as zeros, so releasing them
changes no value anyone can see while the memory goes back to the system.

Better still, where the buffer is about to be replaced by a new one of the same size: the pages
move into the new buffer (mremap with MREMAP_DONTUNMAP, Linux 5.7+), and the old range is left
mapped and empty, reading zeros as a released range does. The new buffer then needs no fresh
pages, which the kernel would have to find and zero (and which on a virtual machine may need
the host to back them first): filling it costs the copy of the rows alone.
"""
import ctypes
import mmap
import sys

import numpy as np

_PAGE = mmap.PAGESIZE
_MADV_DONTNEED = 4
_MREMAP_MAYMOVE, _MREMAP_FIXED, _MREMAP_DONTUNMAP = 1, 2, 4
# Page tables move whole when both ranges start at the same offset in a 2 MiB region.
_PMD = 2 << 20
# Scanned and released this much at a time; the scan stops at the first block that is not zero.
_BLOCK = 2 << 20
_libc = None


def _lib():
    global _libc
    if _libc is None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        libc.madvise.restype = ctypes.c_int
        libc.mremap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int,
                                ctypes.c_void_p]
        libc.mremap.restype = ctypes.c_void_p
        _libc = libc
    return _libc


def _private_anonymous(start, end):
    """Whether [start, end) lies in writable private anonymous mappings only (not a file, not
    shared memory: there, a released page would read back the file's bytes, not zeros)."""
    covered = start
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split(maxsplit=5)
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            if hi <= covered or lo >= end:
                continue
            path = fields[5].strip() if len(fields) > 5 else ""
            if lo > covered or fields[1] != "rw-p" or fields[4] != "0" or \
                    (path and path != "[heap]" and not path.startswith("[anon")):
                return False
            covered = hi
            if covered >= end:
                return True
    return False


def _whole_pages(array):
    """(start, end) addresses of the whole pages inside `array`'s buffer, or None where releasing
    them is not possible or not safe (off Linux, not C-contiguous, under one block, not private
    anonymous memory)."""
    if not sys.platform.startswith("linux") or not array.flags.c_contiguous:
        return None
    addr = array.ctypes.data
    start = (addr + _PAGE - 1) // _PAGE * _PAGE
    end = (addr + array.nbytes) // _PAGE * _PAGE
    if end - start < _BLOCK or not _private_anonymous(start, end):
        return None
    return start, end


def _words(array, start, end):
    addr = array.ctypes.data
    return array.reshape(-1).view(np.uint8)[start - addr:end - addr].view(np.uint64)


def _zero(words):
    """Whether the uint64 `words` are all zero."""
    return not np.bitwise_or.reduce(words)


def _zero_prefix(words):
    """Bytes of `words` (uint64) that are zero from the start, in whole blocks."""
    per_block = _BLOCK // 8
    for first in range(0, words.size, per_block):
        if not _zero(words[first:first + per_block]):
            return first * 8
    return words.size * 8


def starts_with_zero_pages(array):
    """Whether release_zero_pages(array) would release something: the buffer is private
    anonymous memory whose first block of whole pages holds only zeros."""
    pages = _whole_pages(array)
    return pages is not None and _zero(_words(array, pages[0], pages[0] + _BLOCK))


def release_zero_pages(array):
    """Releases the whole pages inside `array`'s buffer while they hold only zeros, from the start
    until the first block that holds anything else. Returns the number of bytes released (0 off
    Linux, for a buffer that is not C-contiguous, or one not in private anonymous memory).

    Only for memory that nothing writes while this runs: a write into a page between the check
    and its release would be lost. The scan and the releases let other Python threads run.
    """
    pages = _whole_pages(array)
    if pages is None:
        return 0
    words = _words(array, *pages)
    per_block = _BLOCK // 8
    madvise = _lib().madvise
    released = 0
    for first in range(0, words.size, per_block):
        block = words[first:first + per_block]
        if not _zero(block) or madvise(pages[0] + first * 8, block.nbytes, _MADV_DONTNEED) != 0:
            break
        released += block.nbytes
    return released


def zero_pages_into(donor, shape, dtype):
    """A new writable, C-contiguous, page-aligned array of `shape` and `dtype` that owns the
    zero pages of `donor` (moved, not copied: nothing new is allocated or zeroed for them), or
    None where that is not possible (off Linux, a kernel without MREMAP_DONTUNMAP, a donor that
    is not private anonymous memory or does not start with a block of zeros). The array's values
    are unspecified, as np.empty's are: it is meant to be overwritten whole.

    `donor` keeps its values: the pages that moved held zeros and its range still reads zeros
    (empty, as after release_zero_pages); from its first block that is not zero on, it keeps its
    own pages. The same caution applies: nothing may write `donor` while this runs.
    """
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    pages = _whole_pages(donor)
    if pages is None or nbytes < _BLOCK:
        return None
    start, end = pages
    moved = min(_zero_prefix(_words(donor, start, end)), nbytes // _PAGE * _PAGE)
    if moved == 0:
        return None
    size = (nbytes + _PAGE - 1) // _PAGE * _PAGE
    buf = mmap.mmap(-1, size + _PMD, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS,
                    prot=mmap.PROT_READ | mmap.PROT_WRITE)
    whole = np.frombuffer(buf, np.uint8)
    base = whole.ctypes.data
    offset = (start - base) % _PMD
    got = _lib().mremap(start, moved, moved, _MREMAP_MAYMOVE | _MREMAP_FIXED | _MREMAP_DONTUNMAP,
                        base + offset)
    if got != base + offset:  # MAP_FAILED: an older kernel, or a mapping it will not move
        return None
    return whole[offset:offset + nbytes].view(dtype).reshape(shape)

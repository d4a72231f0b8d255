"""Returning a buffer's all-zero pages to the kernel.

TensorFlow's graph optimizer folds a large zeros initializer into a constant that the session
keeps for its life, and a resource variable initialized from it shares the constant's buffer. The
first write into the variable then copies it, and the constant's pages stay resident: a second
variable's worth of memory that nobody reads again. Those pages hold only zeros, and a private
anonymous page released with madvise(MADV_DONTNEED) reads back as zeros, so releasing them
changes no value anyone can see while the memory goes back to the system.
"""
import ctypes
import mmap
import sys

import numpy as np

_PAGE = mmap.PAGESIZE
_MADV_DONTNEED = 4
# Scanned and released this much at a time; the scan stops at the first block that is not zero.
_BLOCK = 2 << 20
_libc = None


def _madvise():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        _libc.madvise.restype = ctypes.c_int
    return _libc.madvise


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


def starts_with_zero_pages(array):
    """Whether release_zero_pages(array) would release something: the buffer is private
    anonymous memory whose first block of whole pages holds only zeros."""
    pages = _whole_pages(array)
    return pages is not None and not _words(array, pages[0], pages[0] + _BLOCK).any()


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
    madvise = _madvise()
    released = 0
    for first in range(0, words.size, per_block):
        block = words[first:first + per_block]
        if block.any() or madvise(pages[0] + first * 8, block.nbytes, _MADV_DONTNEED) != 0:
            break
        released += block.nbytes
    return released

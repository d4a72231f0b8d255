"""Imports the native module so that its gRPC, protobuf and abseil resolve to its own copies.

TensorFlow's shared libraries export their private builds of gRPC's C core and abseil into the
process's global symbol scope. A module that then loads the system's libgrpc would have its calls
bound to TensorFlow's copies, built from other sources, and crash. RTLD_DEEPBIND makes the native
module and its dependencies look up symbols in their own libraries first, whatever was imported
before.
"""
import os
import sys

_flags = sys.getdlopenflags()
sys.setdlopenflags(_flags | getattr(os, "RTLD_DEEPBIND", 0))
try:
    from . import _native  # noqa: E402
finally:
    sys.setdlopenflags(_flags)

__all__ = ["_native"]

"""Build the compiled cores.

Every ``*.pyx`` under the packages is cythonized (C++ mode, C++17); every folder named
``*_cpp`` under a package with a ``module.cpp`` becomes one pybind11 extension named after the
folder without ``_cpp`` (``netcore/_packet_cpp/`` -> ``netcore._packet``). New compiled code is
added by adding files, not by editing this script. Generated C++ goes to build/cython.
"""
import glob
import os

from pybind11.setup_helpers import Pybind11Extension
from setuptools import Extension, setup

PACKAGES = ("netcore", "topo", "collectives", "compute", "netcosim")
CXX_FLAGS = ["-O3", "-std=c++17"]


def _cython_extensions():
    from Cython.Build import cythonize

    exts = []
    for pkg in PACKAGES:
        for pyx in sorted(glob.glob(os.path.join(pkg, "**", "*.pyx"), recursive=True)):
            name = os.path.splitext(pyx)[0].replace(os.sep, ".")
            exts.append(Extension(name, [pyx], language="c++", extra_compile_args=CXX_FLAGS))
    if not exts:
        return []
    return cythonize(exts, compiler_directives={"language_level": 3, "boundscheck": False,
                                                "wraparound": False, "cdivision": True},
                     quiet=True, build_dir="build/cython")


def _pybind_extensions():
    # netcore/_packet_cpp/module.cpp (+ other .cpp there) -> extension netcore._packet
    exts = []
    for pkg in PACKAGES:
        for folder in sorted(glob.glob(os.path.join(pkg, "**", "*_cpp"), recursive=True)):
            if not os.path.isfile(os.path.join(folder, "module.cpp")):
                continue
            name = folder[: -len("_cpp")].replace(os.sep, ".")
            sources = sorted(glob.glob(os.path.join(folder, "*.cpp")))
            # link-time optimisation: the event loop, the port logic and the transports live
            # in separate files by job, and must still inline into one another
            exts.append(Pybind11Extension(name, sources, cxx_std=17, include_dirs=[folder],
                                          extra_compile_args=["-O3", "-flto"],
                                          extra_link_args=["-O3", "-flto"]))
    return exts


setup(ext_modules=_cython_extensions() + _pybind_extensions())

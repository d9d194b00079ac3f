"""Build the compiled cores.

Every ``*.pyx`` under the packages is cythonized (C++ mode, C++17); every folder named
``*_cpp`` under a package with a ``module.cpp`` becomes one pybind11 extension named after the
folder without ``_cpp`` (``netcore/_packet_cpp/`` -> ``netcore._packet``). New compiled code is
added by adding files, not by editing this script. Generated C++ goes to build/cython.

A pybind11 folder with a ``pgo/train.cpp`` is built with profile-guided optimisation (GCC): its
sources are compiled instrumented and linked with that training driver, which runs once (a few
seconds), then the extension is compiled with the profile (``PgoBuildExt``; about +15 s of
build time). Any failure on the way falls back to the plain -O3 build with a warning;
``NETCOSIM_NO_PGO=1`` skips it.
"""
import glob
import os
import shutil
import subprocess
import sys

from pybind11.setup_helpers import Pybind11Extension
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

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
            ext = Pybind11Extension(name, sources, cxx_std=17, include_dirs=[folder],
                                    extra_compile_args=["-O3", "-flto"],
                                    extra_link_args=["-O3", "-flto"])
            train = os.path.join(folder, "pgo", "train.cpp")
            ext.pgo_train = train if os.path.isfile(train) else None
            exts.append(ext)
    return exts


class PgoBuildExt(build_ext):
    """Profile-guided build of the extensions that have a training driver (module docstring).

    The instrumented objects are written where the final ones go, so that GCC finds each
    object's profile under the same (path-mangled) name. The training is a deterministic
    simulation counted by one thread (-fprofile-update=single), so the profile, and the build,
    are the same on every run. Code the training does not reach is optimised as it would be
    without a profile (-fprofile-partial-training), not for size.
    """

    def build_extension(self, ext):
        train = getattr(ext, "pgo_train", None)
        if not train or os.environ.get("NETCOSIM_NO_PGO") or not self._stale(ext):
            return super().build_extension(ext)  # (which skips an up-to-date extension)
        compile_args, link_args = list(ext.extra_compile_args), list(ext.extra_link_args)
        pdir = os.path.abspath(os.path.join(self.build_temp, "pgo-" + ext.name))
        try:
            self._train(ext, train, pdir)
        except Exception as exc:  # noqa: BLE001 - whatever failed: the plain build
            self._warn(ext, f"the training step failed ({exc})")
            return super().build_extension(ext)
        use = ["-fprofile-use", f"-fprofile-dir={pdir}", "-fprofile-partial-training",
               "-Wno-missing-profile"]
        ext.extra_compile_args = compile_args + use
        ext.extra_link_args = link_args + use
        try:
            super().build_extension(ext)
            print(f"{ext.name}: built with profile-guided optimisation")
        except Exception as exc:  # noqa: BLE001
            self._warn(ext, f"the build with the profile failed ({exc})")
            ext.extra_compile_args, ext.extra_link_args = compile_args, link_args
            super().build_extension(ext)
        finally:
            ext.extra_compile_args, ext.extra_link_args = compile_args, link_args

    def _stale(self, ext):
        """Whether build_ext would rebuild ``ext`` (its own test), so that an up-to-date
        extension costs no training run."""
        from setuptools.modified import newer_group

        path = self.get_ext_fullpath(ext.name)
        return self.force or newer_group(list(ext.sources) + list(ext.depends or []), path,
                                         "newer")

    @staticmethod
    def _warn(ext, why):
        print(f"WARNING: {ext.name}: {why}; building it without profile-guided optimisation",
              file=sys.stderr)

    def _train(self, ext, train, pdir):
        version = subprocess.run(self.compiler.compiler_so[:1] + ["--version"],
                                 capture_output=True, text=True, check=True).stdout
        if "Free Software Foundation" not in version:
            raise RuntimeError("the C++ compiler is not GCC")
        shutil.rmtree(pdir, ignore_errors=True)  # GCC would add to the counts already there
        os.makedirs(pdir)
        gen = ["-fprofile-generate", "-fprofile-update=single", f"-fprofile-dir={pdir}"]
        engine = [src for src in ext.sources if os.path.basename(src) != "module.cpp"]
        objects = self.compiler.compile(engine, output_dir=self.build_temp,
                                        macros=ext.define_macros, include_dirs=ext.include_dirs,
                                        extra_postargs=list(ext.extra_compile_args) + gen)
        driver = self.compiler.compile([train], output_dir=pdir, macros=ext.define_macros,
                                       include_dirs=ext.include_dirs,
                                       extra_postargs=list(ext.extra_compile_args) + gen)
        self.compiler.link_executable(objects + driver, "train", output_dir=pdir,
                                      extra_postargs=list(ext.extra_link_args) + gen,
                                      target_lang="c++")
        subprocess.run([os.path.join(pdir, "train")], check=True, timeout=600)


setup(ext_modules=_cython_extensions() + _pybind_extensions(),
      cmdclass={"build_ext": PgoBuildExt})

"""The egg Scrapyd runs, built by `scrapyd-deploy` (`setup.py clean -a`, then
`setup.py bdist_egg`), which writes a setup.py of its own into the project
where there is none. The package is described in pyproject.toml, the egg's
settings module by its `scrapy` entry point there. This file only keeps those
two commands from leaving files in the tree: they build in a temporary
directory, removed when they are done, instead of build/ and
crawlproj.egg-info/. It is inside the project because setuptools packs only
metadata found under it.
"""

import atexit
import os
import shutil
import sys
import tempfile

from setuptools import setup

options = {}
if {"bdist_egg", "clean"} & set(sys.argv[1:]):
    scratch = os.path.relpath(tempfile.mkdtemp(prefix=".egg-build-", dir="."))
    atexit.register(shutil.rmtree, scratch, True)
    options = {"build": {"build_base": os.path.join(scratch, "build")}, "egg_info": {"egg_base": scratch}}

setup(options=options)

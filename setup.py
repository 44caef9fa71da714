"""Map the fixed top-level folders onto one import namespace.

The repository layout is fixed (`server/`, `engine/` at the top), but the installed
distribution must not claim bare names like `server`: they become `kernelbrain.server`
and `kernelbrain.engine`. `kernelbrain` itself is an implicit namespace package.
"""

from setuptools import find_packages, setup

ROOTS = {"kernelbrain.server": "server", "kernelbrain.engine": "engine"}

packages = []
for name, folder in ROOTS.items():
    packages.append(name)
    packages += [f"{name}.{sub}" for sub in find_packages(folder)]

setup(packages=packages, package_dir=ROOTS, package_data={"kernelbrain.engine": ["**/*.toml"]})

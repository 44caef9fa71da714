"""The runner's tamper watch (`engine/worker/tamper.py`) on its own, for the changes that leave
a namespace's keys and values as they were: a function's code or defaults replaced in place, a
class member added, a class attribute's class changed into a descriptor, a constant rewritten.
The fingerprint reuses what it computed for a namespace while nothing in it changed (`Memo`);
each change here must still be seen on the checks after it, and nothing once it is undone."""

from __future__ import annotations

import sys
import types

import pytest

from kernelbrain.engine.worker.tamper import Watch

VICTIM = "kb_tamper_watch_victim"


class Descriptor:
    def __get__(self, obj, kind=None):
        return "patched"


class Plain:
    pass


def make_victim() -> types.ModuleType:
    module = types.ModuleType(VICTIM)
    exec(
        "def scale(x, factor=2):\n    return x * factor\n\n"
        "class Holder:\n    def run(self):\n        return 1\n\n"
        "def other(x, factor=3):\n    return x - factor\n",
        vars(module),
    )
    module.Holder.setting = Plain()
    return module


def replace_code(m):
    saved = m.scale.__code__
    m.scale.__code__ = m.other.__code__
    return lambda: setattr(m.scale, "__code__", saved)


def replace_defaults(m):
    saved = m.scale.__defaults__
    m.scale.__defaults__ = (5,)
    return lambda: setattr(m.scale, "__defaults__", saved)


def add_method(m):
    m.Holder.extra = lambda self: 2
    return lambda: delattr(m.Holder, "extra")


def descriptor_in_place(m):
    setting = vars(m.Holder)["setting"]
    setting.__class__ = Descriptor
    assert m.Holder().setting == "patched"
    return lambda: setattr(setting, "__class__", Plain)


def rebind_function(m):
    saved = m.scale
    m.scale = lambda x, factor=2: x
    return lambda: setattr(m, "scale", saved)


PATCHES = {
    "a function's code replaced in place": replace_code,
    "a function's defaults replaced in place": replace_defaults,
    "a method added to a class": add_method,
    "a class attribute turned into a descriptor in place": descriptor_in_place,
    "a module function rebound": rebind_function,
}


@pytest.fixture
def victim():
    module = make_victim()
    sys.modules[VICTIM] = module
    yield module
    del sys.modules[VICTIM]


@pytest.mark.parametrize("name", sorted(PATCHES))
def test_changes_inside_unchanged_namespaces_are_seen_on_every_check(victim, name):
    watch = Watch(lambda m: getattr(m, "__name__", None) == VICTIM)
    watch.before_candidate()
    assert watch.changes() == []  # the second check reuses what the first computed
    undo = PATCHES[name](victim)
    assert watch.changes(), f"{name}: not seen"
    assert watch.changes(), f"{name}: seen once, then taken as the process's own"
    undo()
    assert watch.changes() == [], f"{name}: still reported once undone"

"""Modules of settings, as ``torch._dynamo.config`` and
``torch._inductor.config`` are: the settings they define can be read and
set, and naming any other is an AttributeError, as in PyTorch (a misspelt
setting is not silently kept)."""

from __future__ import annotations

import types


def _missing(owner: str, name: str) -> AttributeError:
    return AttributeError(f"{owner}.{name} does not exist")


def torch_name(module_name: str) -> str:
    return "torch" + module_name.removeprefix("fusegrad")


class SettingsModule(types.ModuleType):
    """The class a settings module takes once its settings are defined:
    its public names (modules imported by it aside) are its settings."""

    def __setattr__(self, name: str, value) -> None:
        if name.startswith("__"):  # the import system's (__spec__, __loader__)
            super().__setattr__(name, value)
            return
        current = self.__dict__.get(name)
        if name.startswith("_") or name not in self.__dict__ or isinstance(current, Group):
            raise _missing(torch_name(self.__name__), name)
        super().__setattr__(name, value)

    def __getattr__(self, name: str):
        raise _missing(torch_name(self.__name__), name)


class Group:
    """A group of settings within a settings module (``config.triton``)."""

    def __init__(self, name: str, **settings):
        object.__setattr__(self, "_name", name)
        self.__dict__.update(settings)

    def __setattr__(self, name: str, value) -> None:
        if name.startswith("_") or name not in self.__dict__:
            raise _missing(self._name, name)
        object.__setattr__(self, name, value)

    def __getattr__(self, name: str):
        raise _missing(object.__getattribute__(self, "_name"), name)

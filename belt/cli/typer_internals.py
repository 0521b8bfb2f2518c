"""Every use of typer's private names, in one module; tests/cli/test_typer_internals.py fails
when typer changes under it.

belt pins typer 0.29 (``typer>=0.29,<0.30``) and relies on these things it does not offer
publicly:

- **Coercion without pydantic.** typer 0.29 coerces every parameter's value through a pydantic
  TypeAdapter built on first use, so any command with an argument would import pydantic (about
  40 ms of a start that is otherwise about 60 ms). :func:`adopt` gives each parameter a
  coercion that takes plainly valid values as they are (a string for ``str``, a flag's bool, an
  enum's own value, digits for an ``int`` without bounds, a string for a ``Path`` without checks,
  lists of those) and hands anything else to typer's own coercion, so every error reads exactly
  as typer words it.
- **Flags without a type in help.** typer 0.29's rich help prints ``<bool>`` after every flag
  (``--json <bool>``), which its plain help does not: :func:`adopt` makes flags show none.

Both are given to belt's own parameters only (:func:`adopt`, called as belt's commands are
built, binds them on each parameter), never to typer's classes: another Typer app in the same
process keeps typer's behaviour.
- **A bare group's help.** A group named with nothing after it raises typer's
  ``NoArgsIsHelpError`` (exit 2); belt's root group catches it to exit 0 (``NoArgsIsHelpError``).
- **Shell completion on demand.** ``add_completion=False`` keeps typer from registering its
  shell classes on every start; :class:`OnDemandCompletion` registers them when a completion
  request arrives, and :func:`completion_script` prints typer's script for a shell.
"""

from __future__ import annotations

import os
import re
from enum import Enum
from pathlib import Path
from types import MethodType
from typing import TYPE_CHECKING, Any, get_args, get_origin

from typer import _coercion
from typer import core as typer_core
from typer._click.exceptions import NoArgsIsHelpError as NoArgsIsHelpError
from typer._completion_classes import completion_init
from typer._completion_shared import get_completion_script
from typer._param_types import coerce_cli_choice
from typer.core import TyperGroup

if TYPE_CHECKING:
    from typer._click import Context

_PLAIN_INT = re.compile(r"-?[0-9]{1,18}")


class _Unset:
    """No plain reading of a value: typer's own coercion decides."""


UNSET = _Unset()


def plain_value(descriptor: Any, value: Any, ctx: Context | None = None) -> Any:
    """``value`` coerced for a parameter, when it is plainly valid; else ``UNSET``."""
    info = descriptor.parameter_info
    if info.parser is not None or descriptor.file_annotation is not None:
        return UNSET
    annotation = descriptor.annotation
    if get_origin(annotation) is list:
        if not isinstance(value, (list, tuple)):
            return UNSET
        (item,) = get_args(annotation)
        items = [_plain_leaf(item, info, element, ctx) for element in value]
        return UNSET if any(i is UNSET for i in items) else items
    return _plain_leaf(annotation, info, value, ctx)


def _plain_leaf(annotation: Any, info: Any, value: Any, ctx: Context | None) -> Any:
    if annotation is str and type(value) is str:
        return value
    if annotation is bool and type(value) is bool:
        return value
    if annotation is int and type(value) is str and info.min is None and info.max is None:
        return int(value) if _PLAIN_INT.fullmatch(value) else UNSET
    if annotation is Path and type(value) is str:
        return _plain_path(info, value)
    if isinstance(annotation, type) and issubclass(annotation, Enum) and type(value) is str:
        try:
            return coerce_cli_choice(
                value, choices=list(annotation), case_sensitive=info.case_sensitive, ctx=ctx
            )
        except ValueError:
            return UNSET  # typer's own coercion words the error
    return UNSET


def _plain_path(info: Any, value: str) -> Any:
    """A ``Path`` parameter's value, when typer would check nothing on it but that a path that
    exists can be read (its defaults); else ``UNSET``."""
    checks = info.path_type is not None or info.resolve_path or info.allow_dash or info.exists
    if checks or info.writable or not (info.file_okay and info.dir_okay):
        return UNSET
    try:
        os.stat(value)
    except OSError:
        return Path(value)
    except ValueError:  # a NUL in the name: typer words what it makes of it
        return UNSET
    if info.readable and not os.access(value, os.R_OK):
        return UNSET  # typer refuses it, in its own words
    return Path(value)


class PlainRuntimeParam(_coercion.RuntimeParam):
    """A parameter's coercion: plainly valid values as they are, the rest by typer's own."""

    def _coerce_value(self, value: Any, param: Any, ctx: Context) -> Any:
        plain = plain_value(param.type_descriptor, value, ctx)
        if plain is not UNSET:
            return plain
        full = _coercion.build_runtime_param(param.type_descriptor)
        param._runtime_param = full
        return full._coerce_value(value, param=param, ctx=ctx)


def _get_runtime_param(self: Any) -> Any:
    if self._runtime_param is None:
        descriptor = self.type_descriptor
        self._runtime_param = PlainRuntimeParam(
            parameter_info=descriptor.parameter_info, annotation=descriptor.annotation
        )
    return self._runtime_param


_TYPER_DISPLAY_TYPE_RICH = typer_core.TyperOption.display_type_rich


def _display_type_rich(self: Any, ctx: Any) -> str | None:
    if self.is_flag and not self.count:
        return None
    return _TYPER_DISPLAY_TYPE_RICH(self, ctx)


def adopt_param(param: Any) -> None:
    """Give one parameter belt's coercion and flag help."""
    if isinstance(param, typer_core._TyperParameter):
        param.get_runtime_param = MethodType(_get_runtime_param, param)  # type: ignore[method-assign]
    if isinstance(param, typer_core.TyperOption):
        param.display_type_rich = MethodType(_display_type_rich, param)  # type: ignore[method-assign]


def adopt(command: Any) -> Any:
    """Coerce the parameters of ``command`` and of every subcommand built so far without
    pydantic, and show its flags without a type (idempotent); returns ``command``."""
    for param in command.params:
        adopt_param(param)
    if not getattr(command.get_help_option, "_belt", False):
        command.get_help_option = _adopting_help_option(command)
    for sub in getattr(command, "commands", {}).values():
        adopt(sub)
    return command


def _adopting_help_option(command: Any) -> Any:
    """``command.get_help_option`` whose option (made by click when a context asks for it, so
    after ``adopt`` saw the command's parameters) is adopted too."""
    made_by_class = type(command).get_help_option

    def get_help_option(self: Any, ctx: Any) -> Any:
        option = made_by_class(self, ctx)
        if option is not None:
            adopt_param(option)
        return option

    get_help_option._belt = True  # type: ignore[attr-defined]
    return MethodType(get_help_option, command)


class OnDemandCompletion(TyperGroup):
    """A group that registers typer's shell classes only when a completion request arrives."""

    def _main_shell_completion(
        self, ctx_args: Any, prog_name: str, complete_var: str | None = None
    ) -> None:
        """Answer a completion request from the scripts ``belt completion SHELL`` prints."""
        var = complete_var or f"_{prog_name}_COMPLETE".replace("-", "_").upper()
        if os.environ.get(var):
            completion_init()
        super()._main_shell_completion(ctx_args, prog_name, complete_var)


def completion_script(*, prog_name: str, complete_var: str, shell: str) -> str:
    """typer's completion script of ``prog_name`` for a shell."""
    return get_completion_script(prog_name=prog_name, complete_var=complete_var, shell=shell)

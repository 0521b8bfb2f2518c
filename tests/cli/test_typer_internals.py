"""belt's reach into typer's private names: still there, still doing what belt relies on.

Every test here fails when typer changes under ``belt.cli.typer_internals``; fix that module (or
drop what typer now does itself), never the callers.
"""

from __future__ import annotations

import ast
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import pytest
import typer
from hypothesis import given
from hypothesis import strategies as st
from typer import _coercion
from typer._click.exceptions import BadParameter
from typer.testing import CliRunner

import belt
from belt.cli import typer_internals
from belt.cli.typer_internals import UNSET, PlainRuntimeParam, plain_value


class Colour(StrEnum):
    red = "red"
    green = "green"


class Adopted(typer.core.TyperCommand):
    """A command whose parameters belt's way was given to, as BeltGroup gives it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        typer_internals.adopt(self)


sample = typer.Typer(add_completion=False)


@sample.command(cls=Adopted)
def paint(
    name: Annotated[str, typer.Argument(metavar="NAME", help="What to paint.")],
    colour: Annotated[Colour, typer.Argument(help="The colour.")],
    coats: Annotated[int | None, typer.Option("--coats", help="How many.")] = None,
    bounded: Annotated[int | None, typer.Option("--bounded", min=1, max=3)] = None,
    tags: Annotated[list[str] | None, typer.Option("--tag", help="Tags.")] = None,
    dry: Annotated[bool, typer.Option("--dry", help="Only say what it would do.")] = False,
    where: Annotated[list[Path] | None, typer.Option("--where", help="Where to paint.")] = None,
    existing: Annotated[Path | None, typer.Option("--existing", exists=True)] = None,
    folder: Annotated[Path | None, typer.Option("--folder", file_okay=False)] = None,
) -> None:
    """Paint a thing."""
    typer.echo(f"{name!r} {colour!r} {coats!r} {bounded!r} {tags!r} {dry!r}")


def params() -> dict[str, Any]:
    command = typer.main.get_command(sample)
    return {p.name: p for p in command.params}


def typer_coercion(param: Any, value: Any) -> Any:
    """What typer's own coercion makes of ``value`` (or the message of its error)."""
    try:
        return _coercion.build_runtime_param(param.type_descriptor).coerce(value, param, None)
    except BadParameter as exc:
        return ("error", exc.message)


def belt_coercion(param: Any, value: Any) -> Any:
    runtime = PlainRuntimeParam(
        parameter_info=param.type_descriptor.parameter_info,
        annotation=param.type_descriptor.annotation,
    )
    try:
        return runtime.coerce(value, param, None)
    except BadParameter as exc:
        return ("error", exc.message)


VALUES = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["red", "green", "Red", "0", "-7", "007", "+5", " 5", "1_000", "9" * 30]),
)


@given(name=st.sampled_from(["name", "colour", "coats", "bounded"]), value=VALUES)
def test_belt_coerces_every_value_as_typer_does(name: str, value: str) -> None:
    param = params()[name]
    assert belt_coercion(param, value) == typer_coercion(param, value)


PATHS = st.one_of(
    VALUES,
    st.sampled_from(["", ".", "..", "~", "-", "a\x00b", "/dev/null", "/", __file__, "no/such"]),
)


@given(name=st.sampled_from(["existing", "folder"]), value=PATHS)
def test_belt_coerces_every_path_as_typer_does(name: str, value: str) -> None:
    param = params()[name]
    assert belt_coercion(param, value) == typer_coercion(param, value)


@given(values=st.lists(PATHS, max_size=4))
def test_belt_coerces_lists_of_paths_as_typer_does(values: list[str]) -> None:
    param = params()["where"]
    assert belt_coercion(param, tuple(values)) == typer_coercion(param, tuple(values))


@given(values=st.lists(VALUES, max_size=4))
def test_belt_coerces_lists_as_typer_does(values: list[str]) -> None:
    param = params()["tags"]
    assert belt_coercion(param, tuple(values)) == typer_coercion(param, tuple(values))


def test_plain_values_skip_pydantic_and_the_rest_go_to_typer() -> None:
    p = params()
    assert plain_value(p["name"].type_descriptor, "x") == "x"
    assert plain_value(p["colour"].type_descriptor, "green") is Colour.green
    assert plain_value(p["coats"].type_descriptor, "12") == 12
    assert plain_value(p["tags"].type_descriptor, ("a", "b")) == ["a", "b"]
    assert plain_value(p["dry"].type_descriptor, True) is True
    assert plain_value(p["where"].type_descriptor, ("a", __file__)) == [Path("a"), Path(__file__)]
    refused = [("colour", "blue"), ("coats", "1.5"), ("bounded", "2"), ("name", 3)]
    refused += [("existing", "a"), ("folder", "a"), ("where", ("a\x00b",))]
    for name, value in refused:
        assert plain_value(p[name].type_descriptor, value) is UNSET


def test_a_command_line_is_coerced_and_refused_as_typer_would() -> None:
    runner = CliRunner()
    result = runner.invoke(sample, ["box", "red", "--coats", "2", "--tag", "a", "--dry"])
    assert result.exit_code == 0, result.output
    assert result.stdout == "'box' <Colour.red: 'red'> 2 None ['a'] True\n"
    refused = runner.invoke(sample, ["box", "blue"])
    assert refused.exit_code == 2
    assert "'blue' is not one of 'red', 'green'" in refused.output
    assert runner.invoke(sample, ["box", "red", "--bounded", "9"]).exit_code == 2


def test_typer_coerces_through_the_runtime_param_belt_installs() -> None:
    param = params()["name"]
    param._runtime_param = None
    assert isinstance(param.get_runtime_param(), PlainRuntimeParam)


def test_help_shows_no_type_after_a_flag_and_keeps_the_rest() -> None:
    result = CliRunner().invoke(sample, ["--help"], env={"COLUMNS": "100", "TERM": "dumb"})
    assert result.exit_code == 0
    assert "<bool>" not in result.stdout
    assert "<int>" in result.stdout  # a valued option keeps its type
    assert "<red|green>" in result.stdout


def test_typer_itself_still_prints_bool_after_flags() -> None:
    # When typer stops doing this, drop the display_type_rich patch from typer_internals.
    param = next(p for p in typer.main.get_command(sample).params if p.name == "dry")
    assert typer_internals._TYPER_DISPLAY_TYPE_RICH(param, None) == "<bool>"
    assert param.display_type_rich(None) is None


def test_completion_helpers_still_exist() -> None:
    script = typer_internals.completion_script(
        prog_name="belt", complete_var="_BELT_COMPLETE", shell="bash"
    )
    assert "_BELT_COMPLETE=complete_bash" in script
    from typer._completion_classes import completion_init

    assert callable(completion_init)
    assert callable(typer.core.TyperGroup._main_shell_completion)


def test_no_other_module_reaches_into_typer_privately() -> None:
    root = Path(belt.__file__).parent
    fence = root / "cli" / "typer_internals.py"
    private = {"_runtime_param", "_main_shell_completion", "display_type_rich"}
    for path in root.rglob("*.py"):
        if path == fence:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith("typer._"), f"{path}: imports {node.module}"
            if isinstance(node, ast.Import):
                for alias in node.names:
                    assert not alias.name.startswith("typer._"), f"{path}: imports {alias.name}"
            if isinstance(node, ast.Attribute):
                assert node.attr not in private, f"{path}:{node.lineno} uses {node.attr}"


@pytest.mark.parametrize("args", [["--help"], ["interrupt", "list", "--help"]])
def test_belts_help_has_no_stray_bool(args: list[str]) -> None:
    from tests.cli.runner import belt as run_belt

    result = run_belt(*args)
    assert result.exit_code == 0
    assert "<bool>" not in result.stdout
    assert "--json" in result.stdout or "--verbose" in result.stdout


def test_another_typer_app_in_the_process_keeps_typers_own_ways() -> None:
    from tests.cli.runner import belt as run_belt

    assert run_belt("interrupt", "list", "--help").exit_code == 0  # belt's commands are built
    other = typer.Typer(add_completion=False)

    @other.command()
    def hello(loud: Annotated[bool, typer.Option("--loud")] = False) -> None:
        typer.echo(f"loud={loud}")

    command = typer.main.get_command(other)
    (loud,) = command.params
    assert not isinstance(loud.get_runtime_param(), PlainRuntimeParam)
    assert loud.display_type_rich(None) == "<bool>"
    result = CliRunner().invoke(other, ["--help"], env={"COLUMNS": "100", "TERM": "dumb"})
    assert result.exit_code == 0
    assert "<bool>" in result.stdout

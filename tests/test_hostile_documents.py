"""Deeply nested or huge JSON, YAML and TOML: a usage error of one line (exit 4 from the
plugin, 2 from the command line), never an internal error (exit 3) nor a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from pytest_scoring.cli.main import main
from pytest_scoring.documents import MAX_DOCUMENT_BYTES

DEEP = 100_000
#: A few lines of YAML aliases that expand to 10**9 values.
LAUGHS = (
    "l0: &a0 [x]\n"
    + "".join(f"l{n}: &a{n} [{', '.join([f'*a{n - 1}'] * 10)}]\n" for n in range(1, 10))
    + "scorers: *a9\n"
)

CONFIGS = {
    "deep JSON": ("c.json", "[" * DEEP + "]" * DEEP, "c.json: nested deeper than 100 levels"),
    "deep YAML": ("c.yaml", "[" * DEEP + "]" * DEEP, "c.yaml: nested deeper than 100 levels"),
    "deep TOML": ("c.toml", "a = " + "[" * DEEP + "]" * DEEP, "c.toml: nested deeper than 100"),
    "nested under the limit of the parser": (
        "c.json",
        '{"scorers": ' + "[" * 500 + "]" * 500 + "}",
        "c.json: nested deeper than 100 levels",
    ),
    "a YAML alias bomb": ("c.yaml", LAUGHS, "c.yaml: more than 1,000,000 values"),
    "a YAML alias cycle": ("c.yaml", "scorers: &a [*a]\n", "c.yaml: nested deeper than 100"),
    "a JSON number of 5,000 digits": ("c.json", "1" * 5000, "c.json: not valid JSON (Exceeds"),
    "a TOML number of 5,000 digits": ("c.toml", "a = " + "1" * 5000, "c.toml: invalid TOML"),
}


@pytest.mark.parametrize(("name", "text", "message"), CONFIGS.values(), ids=list(CONFIGS))
def test_a_hostile_configuration_file_is_a_usage_error(
    pytester: pytest.Pytester, name: str, text: str, message: str
) -> None:
    pytester.makepyfile("def test_ok():\n    pass\n")
    (pytester.path / name).write_text(text)
    result = pytester.runpytest(f"--score-config={name}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    (line,) = [line for line in result.stderr.lines if line.strip()]
    assert message in line
    assert "Traceback" not in result.stdout.str()


def test_a_configuration_file_over_the_size_limit_is_a_usage_error(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile("def test_ok():\n    pass\n")
    (pytester.path / "big.yaml").write_text("#" * (MAX_DOCUMENT_BYTES + 1))
    result = pytester.runpytest("--score-config=big.yaml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "big.yaml: larger than 16,777,216 bytes" in result.stderr.str()


def test_a_deeply_nested_selector_file_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_ok():\n    pass\n")
    (pytester.path / "deep.json").write_text('{"rows": ' * DEEP + "{}" + "}" * DEEP)
    result = pytester.runpytest("--score-selector=@deep.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--score-selector: " in result.stderr.str()
    assert "deep.json: nested deeper than 100 levels" in result.stderr.str()


def match(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["match", *args])
    return result.exit_code, result.output


@pytest.mark.parametrize(
    ("diff", "selector", "message"),
    [
        ({"comparisons": {}}, "[" * DEEP + "]" * DEEP, "s.json: nested deeper than 100 levels"),
        ('{"comparisons": ' * DEEP, {"rows": {}}, "d.json: nested deeper than 100 levels"),
        ({"comparisons": {}}, "9" * 5000, "s.json: not valid JSON (Exceeds the limit"),
    ],
    ids=["deep selector", "deep diff", "huge number"],
)
def test_match_refuses_hostile_json_with_exit_2(
    tmp_path: Path, diff: object, selector: object, message: str
) -> None:
    for name, document in (("d.json", diff), ("s.json", selector)):
        text = document if isinstance(document, str) else json.dumps(document)
        (tmp_path / name).write_text(text)
    code, output = match(str(tmp_path / "d.json"), str(tmp_path / "s.json"))
    assert code == 2
    assert output.count("\n") == 1 and message in output


def test_match_refuses_an_endless_device_before_reading_it(tmp_path: Path) -> None:
    (tmp_path / "s.json").write_text("{}")
    code, output = match("/dev/zero", str(tmp_path / "s.json"))
    assert code == 2
    assert output == (
        "pytest-scoring: error: /dev/zero: cannot read a device: give a JSON file or '-'\n"
    )


def test_match_stops_reading_endless_standard_input(tmp_path: Path) -> None:
    (tmp_path / "s.json").write_text("{}")
    with Path("/dev/zero").open("rb") as zeros:
        result = subprocess.run(
            [sys.executable, "-m", "pytest_scoring", "match", "-", str(tmp_path / "s.json")],
            stdin=zeros,
            capture_output=True,
            timeout=300,
            check=False,
        )
    assert result.returncode == 2
    assert result.stderr.endswith(b"<stdin>: larger than 268,435,456 bytes, the most read\n")

"""The plugin's options and ini settings, combined into one :class:`ScoringSettings`.

Command-line options win over ini settings (the scored repository's ``pytest.ini``,
``tox.ini`` or ``pyproject.toml``), which win over the defaults. :func:`resolve_settings` reads
them through :class:`OptionSource`: a pytest config in process (:class:`PytestOptions`), or the
evaluator's own command line under ``pytest-scoring run``, where no ini file is read at all.
The ini twins of options that carry the evaluator's trust (:data:`EVALUATOR_ONLY_INI`) are
never used: in process the repository's ini file is the repository's.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable
from collections.abc import Iterable
from pathlib import Path
from pathlib import PurePosixPath
from typing import Any
from typing import Final
from typing import NamedTuple
from typing import Protocol
from typing import TypeVar
from typing import cast

from pytest_scoring.core.determinism import DEFAULT_FLAKY
from pytest_scoring.core.score import DEFAULT_VALUE_CAP
from pytest_scoring.core.settings import DEFAULT_DB_PATTERNS
from pytest_scoring.core.settings import DEFAULT_REPORT_ROOT
from pytest_scoring.core.settings import DEFAULT_TEST_PATTERNS
from pytest_scoring.core.settings import STEERING_SETTINGS
from pytest_scoring.core.settings import ScoringSettings
from pytest_scoring.core.settings import ServerDatabase
from pytest_scoring.core.signals import NO_STRICT
from pytest_scoring.core.signals import StrictKinds
from pytest_scoring.core.signals import parse_strict
from pytest_scoring.errors import OptionError
from pytest_scoring.errors import ScoringError
from pytest_scoring.evaluation.flags import fail_under_type
from pytest_scoring.evaluation.flags import path_map_type
from pytest_scoring.evaluation.flags import seconds_type
from pytest_scoring.evaluation.flags import value_cap_type
from pytest_scoring.process.environment import captured_environment

_Number = TypeVar("_Number", int, float)


class OptionSource(Protocol):
    """Where the options and ini settings come from: a pytest config or ``run``'s options."""

    @property
    def rootpath(self) -> Path:
        """The scored repository's root."""
        ...

    @property
    def invocation_dir(self) -> Path:
        """Where the command was started (relative option paths start there)."""
        ...

    @property
    def inipath(self) -> Path | None:
        """The ini file read, if any (relative ini paths start in its folder)."""
        ...

    def getoption(self, name: str, default: Any = None) -> Any:
        """An option's value by its ``dest``."""
        ...

    def getini(self, name: str) -> Any:
        """An ini setting's value (its default when it is not set)."""
        ...


def path_map(pairs: Iterable[tuple[str, str]], root: Path, what: str) -> dict[str, Path]:
    """Sandbox prefixes (without a trailing ``/``) and their local folders (a relative one is
    under ``root``, the repository's resolved root, so a path in it is known to be in it).

    :raises OptionError: naming ``what`` when one sandbox path is mapped twice.
    """
    mapping: dict[str, Path] = {}
    for sandbox, local in pairs:
        prefix = str(PurePosixPath(sandbox))
        if prefix in mapping:
            raise OptionError(f"{what}: {prefix} is mapped twice")
        mapping[prefix] = root / local
    return mapping


def load_json_argument(text: str, what: str, base: Path) -> Any:
    """Parse ``JSON`` or ``@FILE`` (relative to ``base``) given for option ``what``."""
    from pytest_scoring.documents import parse_json
    from pytest_scoring.documents import read_document

    try:
        if text.startswith("@"):
            path = base / text[1:]
            return parse_json(read_document(str(path)), str(path))
        return parse_json(text, "inline JSON")
    except ScoringError as error:
        raise OptionError(f"{what}: {error}") from None


def _option_or_ini(config: OptionSource, name: str) -> Any:
    value = config.getoption(name)
    return value if value not in (None, [], False) else config.getini(name)


class _PathSetting(NamedTuple):
    """A path-valued setting as given, the folder it is relative to, and where it came from."""

    text: str | None
    base: Path
    #: ``--score-selector`` or ``score_selector (ini)``, for messages.
    source: str

    def path(self) -> Path | None:
        return None if not self.text else self.base / self.text


def _path_setting(config: OptionSource, name: str) -> _PathSetting:
    """An option is relative to the folder pytest was started in; an ini setting to the ini
    file's folder, as pytest resolves its own ini paths (``-o`` too; the start folder when
    there is no ini file). So ``cd tests && pytest`` finds the same files (docs/report.md)."""
    value = config.getoption(name)
    if value:
        flag = "--" + name.replace("_", "-")
        return _PathSetting(str(value), config.invocation_dir, flag)
    return _PathSetting(config.getini(name) or None, _ini_folder(config), f"{name} (ini)")


def _path_list_setting(config: OptionSource, name: str) -> list[Path]:
    """A repeatable path option or its ``linelist`` ini twin, resolved as :func:`_path_setting`."""
    values = config.getoption(name)
    if values:
        return [Path(config.invocation_dir, value) for value in values]
    return [_ini_folder(config) / value for value in config.getini(name)]


def _ini_folder(config: OptionSource) -> Path:
    return Path(config.inipath.parent if config.inipath else config.invocation_dir)


def split_config_argument(text: str, base: Path) -> tuple[Path, str | None]:
    """``FILE`` or ``FILE#NAME`` (a fixture of a fixtures file), ``FILE`` relative to ``base``.

    A ``#`` belongs to the file name when the whole text names an existing file.
    """
    whole = base / text
    if "#" not in text or whole.is_file():
        return whole, None
    position = text.find("#")
    while position != -1:
        if (base / text[:position]).is_file():
            break
        position = text.find("#", position + 1)
    if position == -1:
        position = text.find("#")
    return base / text[:position], text[position + 1 :]


def _given(config: OptionSource) -> frozenset[str]:
    """The steering settings given as command-line options."""
    return frozenset(
        name for name in STEERING_SETTINGS if config.getoption(name) not in (None, [], False)
    )


def _path_map(config: OptionSource, root: Path) -> dict[str, Path]:
    pairs = config.getoption("score_path_maps")
    if not pairs:
        try:
            pairs = [path_map_type(line) for line in config.getini("score_path_maps")]
        except argparse.ArgumentTypeError as error:
            raise OptionError(f"score_path_maps (ini): {error}") from None
    try:
        return path_map(pairs, root, "--score-path-map")
    except OptionError as error:
        raise OptionError(str(error)) from None


def resolve_settings(config: OptionSource, strict: StrictKinds = NO_STRICT) -> ScoringSettings:
    """Merge options, ini settings and defaults; raise :class:`~pytest_scoring.errors.OptionError`
    on bad values.

    :param strict: the strict kinds when ``--score-strict`` is not given: none in process,
        :data:`~pytest_scoring.core.signals.DEFAULT_STRICT` under ``run``.

    Options that only matter to scorers that do not run turn on what they need (see
    :func:`~pytest_scoring.plugin.assemble.build_scorers`), so they also turn scoring on.
    """
    root = Path(config.rootpath)
    report = _path_setting(config, "score_report")
    selector = _path_setting(config, "score_selector")
    config_setting = _path_setting(config, "score_config")
    config_file, config_entry = (
        split_config_argument(config_setting.text, config_setting.base)
        if config_setting.text
        else (None, None)
    )
    settings = ScoringSettings(
        root=root,
        enabled=bool(_option_or_ini(config, "score") or report.text),
        db_diff=bool(_option_or_ini(config, "score_db_diff")),
        selector=(
            None
            if not selector.text
            else load_json_argument(selector.text, selector.source, selector.base)
        ),
        reference=_path_setting(config, "score_reference").path(),
        test_patterns=list(_option_or_ini(config, "score_test_patterns") or DEFAULT_TEST_PATTERNS),
        db_patterns=list(_option_or_ini(config, "score_db_patterns") or DEFAULT_DB_PATTERNS),
        config_file=config_file,
        config_entry=config_entry,
        path_map=_path_map(config, root.resolve()),
        selector_timeout=_number_setting(config, "score_selector_timeout", seconds_type),
        explicit=_given(config),
        # The default sits in the rootdir, as pytest's own .pytest_cache does.
        report_root=report.path() or root / DEFAULT_REPORT_ROOT,
        markdown=_path_setting(config, "score_markdown").path(),
        fail_under=_number_setting(config, "score_fail_under", fail_under_type),
        deterministic=bool(_option_or_ini(config, "score_deterministic")),
        # No ini twins: a repository must not rerun its own failures until they pass.
        retries=int(config.getoption("score_retries") or 0),
        flaky=config.getoption("score_flaky") or DEFAULT_FLAKY,
        db_reset=bool(_option_or_ini(config, "score_db_reset")),
        db_reset_servers=bool(config.getoption("score_db_reset")),
        db_exclude=_path_list_setting(config, "score_db_exclude"),
        value_cap=_number_setting(config, "score_value_cap", value_cap_type) or DEFAULT_VALUE_CAP,
        selection=_selection(config),
        expected_source=_option_path(config, "score_expected_tests"),
        strict=_strict(config.getoption("score_strict"), strict),
        ignored_ini=_ignored_ini(config),
        # No ini twin: the repository's files never choose what its report keeps.
        evidence=config.getoption("score_evidence") or "diffs",
        verify_tests=verify_tests_path(
            config.getoption("score_verify_tests"), config.invocation_dir
        ),
    )
    settings.db_admin_url, settings.databases = _url_databases(config)
    if settings.databases:
        from pytest_scoring.db.servers import check_repository_databases

        check_repository_databases(settings.databases, settings.db_reset_servers)
    if (
        settings.fail_under is not None
        or settings.markdown is not None
        or settings.expected_source is not None
        or settings.db_diff
        or settings.selector is not None
        or settings.db_reset
        or settings.databases
        or settings.reference
        or settings.config_file
        or {"score_test_patterns", "score_db_patterns"} & settings.explicit
    ):
        settings.enabled = True
    if settings.enabled:
        check_report_root(settings.report_root)
    return settings


def _url_databases(config: OptionSource) -> tuple[str | None, list[ServerDatabase]]:
    """``--score-db-url`` (else its ini twin ``score_db_urls``), each on the server of
    ``--score-db-admin-url``, which has no ini twin (see :data:`EVALUATOR_ONLY_INI`).

    A database the ini file names is the scored repository's choice: ``${NAME}`` only as a
    whole URL, one the repository's role owns, a ``selection`` signal, and never
    ``--score-db-reset`` (docs/security.md).

    :raises OptionError: for a URL that cannot be used, naming the option.
    """
    urls = config.getoption("score_db_urls")
    admin_url = config.getoption("score_db_admin_url")
    named = urls or config.getini("score_db_urls")
    if not named and not admin_url:
        return None, []  # a run without server databases imports nothing of theirs
    from pytest_scoring.db.servers import check_names
    from pytest_scoring.db.servers import expand
    from pytest_scoring.db.servers import expand_from_repository
    from pytest_scoring.db.servers import server_database

    environ = captured_environment()
    admin = expand(admin_url, environ, "--score-db-admin-url") if admin_url else None
    if urls:
        what = "--score-db-url"
        databases = [server_database(expand(url, environ, what), admin, what) for url in urls]
    else:
        what = "score_db_urls (ini)"
        databases = [
            server_database(
                expand_from_repository(url, environ, what, url=True), admin, what, named_by=what
            )
            for url in named
        ]
    check_names(databases)
    return admin, databases


def verify_tests_path(value: str | None, base: Path) -> Path | None:
    """``--score-verify-tests=PATH`` (relative to ``base``, where pytest was started), from
    the command line only: an ini setting of the scored repository never chooses what its
    tests are checked against.

    :raises OptionError: when PATH is not a folder.
    """
    if not value:
        return None
    path = Path(base, value)
    if not path.is_dir():
        raise OptionError(f"--score-verify-tests: {path} is not a folder")
    return path


def check_report_root(report_root: Path) -> None:
    """Create the report root and write in it now, so an unusable one stops the session
    before any test runs instead of losing the report after all of them."""
    try:
        report_root.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryDirectory(dir=report_root).cleanup()
    except OSError as error:
        raise OptionError(
            f"--score-report: cannot write the report under {report_root}: {error}"
        ) from None


def _selection(config: OptionSource) -> list[str]:
    args: list[str] = []
    for flag, name in (("-k", "keyword"), ("-m", "markexpr")):
        value = config.getoption(name, default="")
        args += [flag, value] if value else []
    return args


def _number_setting(
    config: OptionSource, name: str, parse: Callable[[str], _Number]
) -> _Number | None:
    """A number from its option (argparse has parsed it) or its ini twin (parsed here), or
    None when neither is set."""
    value = config.getoption(name)
    if value is not None:
        return cast("_Number", value)
    text = str(config.getini(name) or "")
    if not text.strip():
        return None
    try:
        return parse(text)
    except argparse.ArgumentTypeError as error:
        raise OptionError(f"{name} (ini): {error}") from None


def _strict(option: str | None, default: StrictKinds) -> StrictKinds:
    """``--score-strict`` (alone: ``default,containment``), else the route's ``default``. Its
    ini twin is never read: the strict kinds are the evaluator's choice (see
    :data:`EVALUATOR_ONLY_INI`)."""
    if option is None:
        return default
    try:
        return parse_strict(option)
    except ValueError as error:
        raise OptionError(f"--score-strict: {error}") from None


#: ini settings whose value carries the evaluator's trust: the scored repository's ini file
#: must not weaken what the evaluator chose, so they are ignored (each one found is an
#: integrity signal) and only the command line counts.
EVALUATOR_ONLY_INI: Final = ("score_strict", "score_expected_tests", "score_db_admin_url")


def _option_path(config: OptionSource, name: str) -> Path | None:
    """A path option given on the command line, relative to where pytest was started; its ini
    twin is never read (see :data:`EVALUATOR_ONLY_INI`)."""
    value = config.getoption(name)
    return Path(config.invocation_dir, value) if value else None


def _ignored_ini(config: OptionSource) -> dict[str, str]:
    """The :data:`EVALUATOR_ONLY_INI` settings the ini file gives, with their values."""
    found = {name: str(config.getini(name) or "").strip() for name in EVALUATOR_ONLY_INI}
    if found["score_db_admin_url"]:  # said, never shown: it may hold a password
        found["score_db_admin_url"] = "(a URL)"
    return {name: value for name, value in found.items() if value}

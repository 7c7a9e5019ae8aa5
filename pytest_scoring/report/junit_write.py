"""JUnit XML out: the scores as test-suite properties of ``--junitxml``, a batch's files merged.

When pytest writes ``--junitxml``, the scores become properties ``score:<name>`` = value of
every test suite. The file comes from the tests' own run (under ``run``, the child's file
is copied where ``--junitxml`` asked), so it is rewritten as a stream, one element at a time,
and holds at most :data:`~pytest_scoring.report.xml_stream.MAX_BYTES` of the file it was
copied from: past that it is cut after the last whole ``<testcase>``, with a comment saying
how much was left out, and its open elements are closed (docs/security.md#bounds).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO
from typing import Final
from xml.sax.saxutils import escape
from xml.sax.saxutils import quoteattr

from pytest_scoring.core.score import Score
from pytest_scoring.errors import JUnitError
from pytest_scoring.report.xml_stream import BoundedParser
from pytest_scoring.report.xml_stream import ByteBudget
from pytest_scoring.report.xml_stream import Cut
from pytest_scoring.report.xml_stream import open_regular
from pytest_scoring.text import value_text

#: The prefix of the test-suite properties that carry scores.
PROPERTY_PREFIX: Final = "score:"
_DECLARATION: Final = b'<?xml version="1.0" encoding="utf-8"?>\n'

#: The properties to add to a suite, from how many suites enclose it (0: a top-level one).
Additions = Callable[[int], list[tuple[str, str]]]


@dataclass(slots=True)
class _SuiteProperties:
    """A suite's properties to add, and whether they are written."""

    adding: list[tuple[str, str]]
    done: bool = False


@dataclass(slots=True)
class _Open:
    """An element written whose end tag is not."""

    tag: str
    #: Where its start tag begins in the output.
    at: int
    #: A ``<testsuite>``'s properties to add.
    suite: _SuiteProperties | None = None
    #: A suite's own ``<properties>``, which ours join at its end.
    joining: _SuiteProperties | None = None


class _Rewrite(BoundedParser):
    """Copies a JUnit file's elements and text to ``out``, adding properties to its suites.

    Ours go into a suite's own ``<properties>`` when it is its first child (as the JUnit
    schema and pytest place it), else into a new one before its first child; existing
    properties whose name starts with ``drop`` are left out (an earlier scoring's).
    """

    def __init__(
        self, out: BinaryIO, additions: Additions, drop: str | None, keep_root: bool = True
    ):
        super().__init__()
        self.out, self.additions, self.drop, self.keep_root = out, additions, drop, keep_root
        self.open: list[_Open] = []
        #: Where the output is: the offset of each start tag, to cut back to.
        self.written = out.tell()
        #: The depth of an element being left out with everything inside it; 0 when none.
        self.skipping = 0
        #: The last thing written is a start tag without its ``>``: an element that ends
        #: now is written ``<tag/>``, keeping the copy no larger than the file it copies.
        self.unclosed = False

    def write(self, text: str) -> None:
        """Write ``text``, after the ``>`` of a start tag still open (see :meth:`_close`)."""
        if self.unclosed:
            self.unclosed, text = False, f">{text}"
        data = text.encode("utf-8")
        self.out.write(data)
        self.written += len(data)

    def start(self, tag: str, attributes: dict[str, str]) -> None:
        if self.skipping or (self.depth == 1 and tag == "testsuites" and not self.keep_root):
            return
        parent = self.open[-1] if self.open else None
        joining = None
        if parent is not None and parent.suite is not None and not parent.suite.done:
            parent.suite.done = True
            if tag == "properties":
                joining = parent.suite
            else:
                self._write_properties(parent.suite.adding)
        if parent is not None and parent.joining is not None and self._dropped(attributes):
            self.skipping = self.depth
            return
        at = self.written
        pairs = "".join(f" {name}={quoteattr(value)}" for name, value in attributes.items())
        self.write(f"<{tag}{pairs}")
        self.unclosed = True
        level = sum(1 for element in self.open if element.suite is not None)
        suite = _SuiteProperties(self.additions(level)) if tag == "testsuite" else None
        self.open.append(_Open(tag, at, suite, joining))

    def _dropped(self, attributes: dict[str, str]) -> bool:
        return self.drop is not None and attributes.get("name", "").startswith(self.drop)

    def text(self, data: str) -> None:
        if self.open and not self.skipping:
            self.write(escape(data))

    def end(self, tag: str) -> None:
        if self.skipping:
            self.skipping = 0 if self.depth == self.skipping else self.skipping
        elif self.open:  # else the end of a root left out
            self._close(self.open.pop())

    def _close(self, element: _Open) -> None:
        if element.joining is not None:
            self._write_property_elements(element.joining.adding)
        if element.suite is not None and not element.suite.done:
            element.suite.done = True
            self._write_properties(element.suite.adding)
        if self.unclosed:
            self.unclosed = False
            self.write("/>")
        else:
            self.write(f"</{element.tag}>")

    def _write_properties(self, adding: list[tuple[str, str]]) -> None:
        if adding:
            self.write("<properties>")
            self._write_property_elements(adding)
            self.write("</properties>")

    def _write_property_elements(self, adding: list[tuple[str, str]]) -> None:
        for name, value in adding:
            self.write(f"<property name={quoteattr(name)} value={quoteattr(value)}/>")

    def copy(self, name: Path, source: BinaryIO) -> Cut | None:
        """Copy ``source`` (named ``name`` in messages) within the bounds; a cut drops the
        ``<testcase>`` it fell in, says how much was left, and closes what is open."""
        cut = self.feed(name, source, ByteBudget())
        if cut is not None:
            self._cut_back()
            said = cut.describe("copied").replace("--", "- -")  # a comment holds no "--"
            self.write(f"<!-- pytest-scoring: {said} -->")
        while self.open:
            self._close(self.open.pop())
        return cut

    def _cut_back(self) -> None:
        """Leave out the ``<testcase>`` the cut fell in, and everything written after it."""
        self.skipping = 0
        case = next((i for i, element in enumerate(self.open) if element.tag == "testcase"), None)
        if case is not None:
            self.out.seek(self.open[case].at)
            self.out.truncate()
            self.written, self.unclosed = self.open[case].at, False
            del self.open[case:]


@contextlib.contextmanager
def _replacing(target: Path) -> Iterator[BinaryIO]:
    """A file that replaces ``target`` once written whole (never half a file in its place)."""
    building = target.with_name(f".{target.name}.scoring.tmp")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with building.open("wb") as out:
            yield out
        building.replace(target)
    except OSError as error:
        raise JUnitError(f"{target}: cannot write ({error.strerror})") from None
    finally:
        building.unlink(missing_ok=True)


def add_score_properties(
    path: Path, scores: Mapping[str, Score], source: Path | None = None
) -> Cut | None:
    """Give every test suite of the JUnit file at ``path`` the properties ``score:<name>`` =
    value; properties from an earlier scoring are replaced, not repeated.

    :param source: the file to copy from, when not ``path`` itself (``run`` copies the
        child's file, which must be a regular file and not a link: the child could write
        its folder).
    :returns: where the copy was cut at a bound, or None.
    :raises JUnitError: when the file cannot be read or written.
    """
    properties = [
        (f"{PROPERTY_PREFIX}{name}", value_text(score.get("value")))
        for name, score in scores.items()
    ]
    with (
        open_regular(source or path, follow_symlinks=source is None) as reading,
        _replacing(path) as out,
    ):
        out.write(_DECLARATION)
        return _Rewrite(out, lambda _: properties, PROPERTY_PREFIX).copy(path, reading)


def merge_junit(parts: Sequence[tuple[str, Path]], target: Path) -> None:
    """Write the JUnit XML of a batch: the test suites of every repository's ``junit.xml``
    (with its own ``score:<name>`` properties), each with a ``repository`` property naming it.

    :param parts: each repository's name and its JUnit XML file (a repository without one
        is left out).
    :raises JUnitError: when a file cannot be read or the result cannot be written.
    """
    with _replacing(target) as out:
        out.write(_DECLARATION + b"<testsuites>")
        for repository, path in parts:
            if not path.is_file():
                continue
            with open_regular(path) as reading:
                _Rewrite(out, _top_level([("repository", repository)]), None, False).copy(
                    path, reading
                )
        out.write(b"</testsuites>")


def _top_level(properties: list[tuple[str, str]]) -> Additions:
    """``properties`` for the top-level suites of a file, none for the suites inside them."""
    return lambda level: properties if level == 0 else []

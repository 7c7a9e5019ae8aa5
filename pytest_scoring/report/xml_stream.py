"""XML that a scored repository's run wrote, read as a stream within bounds.

A JUnit file comes from the tests' own run, so it may be any size and hold anything: a
``conftest.py`` that swaps pytest's file for a 108 MB one made an evaluator that parsed the
whole tree peak at 864 MB (issue 26). Here the file goes through expat a chunk at a time, and
every handler sees one element's start, text or end, never the tree. Three bounds hold
whatever the file is:

- **bytes**: at most :data:`MAX_BYTES` of a file are read (of all files, for one reading of
  several); the rest is cut;
- **one token**: expat holds a tag (with its attributes), a comment or a processing
  instruction whole until it ends, so one that runs past :data:`MAX_TOKEN` bytes is cut there;
- **depth**: an element nested deeper than :data:`MAX_DEPTH` is cut there;
- **entities**: a file that declares an entity is refused. JUnit XML needs none, and a
  declared entity is how "billion laughs" expands a few kilobytes into gigabytes; expat
  fetches no external entity, and an undeclared one is a well-formedness error. (Refusing
  declarations is defusedxml's default, without depending on the expat version's own
  amplification limit.)

What a reader stops reading is a :class:`Cut`: where, why, and how many bytes were left.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO
from typing import Final
from typing import final
from xml.parsers import expat

from pytest_scoring.errors import JUnitError

#: Bytes of a file read (of all files together, in one reading of several): 64 MiB.
MAX_BYTES: Final = 64 * 1024 * 1024
#: Bytes one tag, comment or processing instruction may take: expat holds it whole (and a
#: tag's attributes become one dictionary).
MAX_TOKEN: Final = 1024 * 1024
#: Elements open at once: expat keeps each open element's name until it ends.
MAX_DEPTH: Final = 100
#: Bytes read from the file and handed to expat at a time.
_CHUNK: Final = 256 * 1024
#: Expat's error code for a file without an element (empty, or only blanks).
_NO_ELEMENT: Final = expat.errors.codes[expat.errors.XML_ERROR_NO_ELEMENTS]


@final
class Stop(Exception):
    """Raised by a handler to stop the reading: a bound was reached (the reason)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@final
@dataclass(frozen=True, slots=True)
class Cut:
    """Where the reading of a file stopped before its end, and why."""

    path: Path
    #: Bytes of the file read before the cut.
    read: int
    #: The file's size.
    size: int
    #: The bound that was reached (``"64 MiB"``, ``"100,000 test cases"``…).
    reason: str

    def describe(self, verb: str = "read") -> str:
        """``FILE: cut at BOUND, N of its M bytes not VERB``."""
        left = self.size - self.read
        return f"{self.path}: cut at {self.reason}, {left:,} of its {self.size:,} bytes not {verb}"


@dataclass(slots=True)
class ByteBudget:
    """The bytes a reading may still read: one budget is shared by the files of one reading."""

    left: int = MAX_BYTES


def open_regular(path: Path, follow_symlinks: bool = True) -> BinaryIO:
    """``path`` opened for reading, when it is a regular file (never a FIFO that blocks, or
    a device without end).

    :param follow_symlinks: false where the file lies in a folder the repository's processes
        could write (a link there could point at any file the evaluator may read).
    :raises JUnitError: naming the file.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | (0 if follow_symlinks else os.O_NOFOLLOW)
    try:
        descriptor = os.open(path, flags)
    except OSError as error:
        raise JUnitError(f"{path}: cannot read ({error.strerror})") from None
    source = os.fdopen(descriptor, "rb")
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        source.close()
        raise JUnitError(f"{path}: cannot read (not a regular file)")
    return source


def _refuse_entities(*_: object) -> None:
    raise JUnitError("declares an XML entity (refused: JUnit XML needs none)")


class BoundedParser:
    """An expat parser fed a file a chunk at a time, within the bounds of the module.

    A subclass handles the events: :meth:`start`, :meth:`end` and :meth:`text` (called with
    text as expat delivers it, possibly in pieces); any of them may raise :class:`Stop`.
    :attr:`depth` is the depth of the element starting or ending (1: the root).
    """

    def __init__(self) -> None:
        self.parser = expat.ParserCreate(encoding=None)
        self.parser.StartElementHandler = self._on_start
        self.parser.EndElementHandler = self._on_end
        self.parser.CharacterDataHandler = self._on_text
        self.parser.EntityDeclHandler = _refuse_entities
        self.parser.UnparsedEntityDeclHandler = _refuse_entities
        # Expat 2.6+ may hold back a long token until more data arrives; read as it comes.
        deferral: Callable[[bool], None] | None = getattr(
            self.parser, "SetReparseDeferralEnabled", None
        )
        if deferral is not None:
            deferral(False)
        #: Bytes of the file before the start of the event being handled (expat's count).
        self._event_at = 0
        self._started = False
        self.depth = 0

    def start(self, tag: str, attributes: dict[str, str]) -> None:
        """An element starts."""

    def end(self, tag: str) -> None:
        """An element ends."""

    def text(self, data: str) -> None:
        """Character data (entity references resolved, CDATA as text)."""

    def position(self) -> int:
        """Bytes of the file before the event being handled."""
        return self.parser.CurrentByteIndex

    def _on_start(self, tag: str, attributes: dict[str, str]) -> None:
        self._event_at, self._started = self.parser.CurrentByteIndex, True
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise Stop(f"elements nested {MAX_DEPTH} deep")
        self.start(tag, attributes)

    def _on_end(self, tag: str) -> None:
        self._event_at = self.parser.CurrentByteIndex
        self.end(tag)
        self.depth -= 1

    def _on_text(self, data: str) -> None:
        self._event_at = self.parser.CurrentByteIndex
        self.text(data)

    def feed(self, path: Path, source: BinaryIO, budget: ByteBudget) -> Cut | None:
        """Read ``source`` (the file at ``path``) to its end or to a bound.

        :returns: None when the whole file was read, else where and why it was cut.
        :raises JUnitError: naming the file when it is not well-formed XML, declares an
            entity, or cannot be read.
        """
        size, fed = os.fstat(source.fileno()).st_size, 0
        try:
            while True:
                if budget.left <= 0:
                    return Cut(path, fed, max(size, fed), byte_text(MAX_BYTES))
                chunk = source.read(min(_CHUNK, budget.left))
                if not chunk:
                    break
                budget.left -= len(chunk)
                fed += len(chunk)
                self.parser.Parse(chunk, False)
                if fed - self._event_at > MAX_TOKEN:
                    return Cut(path, self._event_at, max(size, fed), _token_reason())
            self.parser.Parse(b"", True)
        except Stop as stop:
            return Cut(path, self.position(), max(size, fed), stop.reason)
        except expat.ExpatError as error:
            if error.code == _NO_ELEMENT and not self._started:
                raise JUnitError(f"{path}: empty file, expected JUnit XML") from None
            raise JUnitError(f"{path}: not well-formed XML ({error})") from None
        except JUnitError as error:
            raise JUnitError(f"{path}: {error}") from None
        except OSError as error:
            raise JUnitError(f"{path}: cannot read ({error.strerror})") from None
        return None


def byte_text(count: int) -> str:
    """``64 MiB`` for the bounds, which are whole MiB."""
    return f"{count // (1024 * 1024)} MiB"


def _token_reason() -> str:
    return f"a tag, comment or processing instruction longer than {byte_text(MAX_TOKEN)}"

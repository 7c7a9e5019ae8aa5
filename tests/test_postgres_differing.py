"""The comparison of both sides' COPY lines (docs/databases.md#postgresql): the stretches
both sides share are skipped as bytes, and what is left differs exactly as a comparison of
every line, one by one, says, wherever either side's chunks end."""

from __future__ import annotations

import io
import random
from collections.abc import Iterator

import pytest

from pytest_scoring.db.diff_types import ColumnJSON
from pytest_scoring.db.postgres.catalog import PgTable
from pytest_scoring.db.postgres.differing import MostlyDifferent
from pytest_scoring.db.postgres.differing import common_length
from pytest_scoring.db.postgres.differing import compare_streams

#: Chunk sizes (lines) of each side: a line a chunk, chunks ending apart, one chunk.
SIZES = [(1, 1), (7, 13), (4096, 3), (100_000, 100_000)]


def _table(key_oid: int) -> PgTable:
    """``(id, note)`` keyed by ``id``: an ``int4`` key streams in key order, a ``text`` key
    in the order of a hash of it (each line then starting with the hash, ending with a
    ctid)."""
    columns = (
        ColumnJSON(name="id", type="integer", nullable=False, primary_key=True),
        ColumnJSON(name="note", type="text", nullable=True, primary_key=False),
    )
    kind = "integer" if key_oid == 23 else "text"
    return PgTable("t", "public", "t", columns, (kind, "text"), (key_oid, 25), ("id",), ())


def _chunks(lines: list[bytes], size: int) -> Iterator[bytes]:
    for start in range(0, len(lines), size):
        yield b"".join(lines[start : start + size])


def _compare(
    table: PgTable, old: list[bytes], new: list[bytes], sizes: tuple[int, int]
) -> tuple[list[str], list[str]]:
    """The handles each side's comparison wrote, in the order written."""
    handles = io.StringIO(), io.StringIO()
    compare_streams(
        _chunks(old, sizes[0]),  # type: ignore[arg-type]
        _chunks(new, sizes[1]),  # type: ignore[arg-type]
        handles[0],
        handles[1],
        table,
    )
    return handles[0].getvalue().splitlines(), handles[1].getvalue().splitlines()


def _keyed(rows: dict[int, str]) -> list[bytes]:
    return [b"%d\t%s\n" % (key, note.encode()) for key, note in sorted(rows.items())]


def _keys_only_in(lines: list[bytes], other: list[bytes]) -> list[str]:
    return [line.split(b"\t")[0].decode() for line in lines if line not in set(other)]


@pytest.mark.parametrize("sizes", SIZES)
def test_lines_in_key_order_differ_exactly_where_a_line_by_line_comparison_says(
    sizes: tuple[int, int],
) -> None:
    """5,000 rows, 300 removed, 300 changed (by a character added at the end, so that the old
    line is the new one's start, or by an escaped tab), rows added before the first and after
    the last, one with the removed first row's note: the keys of exactly the lines with no
    equal line on the other side, in key order."""
    shuffle = random.Random(7)
    rows = {key: f"note {shuffle.randrange(10**6)}" for key in range(1, 5001)}
    after = dict(rows)
    for key in shuffle.sample(sorted(rows), 300):
        del after[key]
    for key in shuffle.sample(sorted(after), 300):
        after[key] += shuffle.choice(["!", "\\t", "2"])
    after |= {-5: "new", 0: "new", 7000: "new", 7001: rows[1]}
    old, new = _keyed(rows), _keyed(after)

    removed, added = _compare(_table(23), old, new, sizes)

    assert removed == _keys_only_in(old, new)
    assert added == _keys_only_in(new, old)
    assert (len(removed), len(added)) == (600, 304)


@pytest.mark.parametrize("sizes", SIZES)
def test_lines_sharing_a_hash_pair_by_content_whatever_their_order_and_ctid(
    sizes: tuple[int, int],
) -> None:
    """Lines ordered by a hash of the key, three keys sharing one hash (listed in another
    order on each side): a row moved to another ctid is the same row; a changed one and a
    removed one differ, by their ctids."""
    old = [b"1\ta\tx\t(0,1)\n", b"5\tb\tx\t(0,2)\n", b"5\tc\tx\t(0,3)\n", b"5\td\tx\t(0,4)\n",
           b"9\te\tx\t(0,5)\n"]  # fmt: skip
    new = [b"1\ta\tx\t(0,1)\n", b"5\td\tx\t(7,1)\n", b"5\tc\ty\t(7,2)\n", b"9\te\tx\t(0,5)\n"]

    removed, added = _compare(_table(25), old, new, sizes)

    assert sorted(removed) == ["(0,2)", "(0,3)"]
    assert added == ["(7,2)"]


@pytest.mark.parametrize(
    "before", [dict.fromkeys(range(20_000), "old"), dict.fromkeys(range(10), "new")]
)
def test_a_table_most_of_whose_lines_differ_is_given_up_early(before: dict[int, str]) -> None:
    """Every row changed, or nearly all rows added (the side that runs on alone)."""
    old, new = _keyed(before), _keyed(dict.fromkeys(range(20_000), "new"))

    with pytest.raises(MostlyDifferent):
        _compare(_table(23), old, new, (4096, 4096))


@pytest.mark.parametrize("at", [0, 1, 255, 256, 257, 4095, 5000, 70_000, None])
@pytest.mark.parametrize("offsets", [(0, 0), (3, 11)])
def test_the_common_length_is_where_the_first_byte_differs(
    at: int | None, offsets: tuple[int, int]
) -> None:
    """Whether the first differing byte lies in the first span compared, on a span's
    edge, or far on, or the shorter side ends first."""
    text = random.Random(at).randbytes(80_000)
    changed = text if at is None else text[:at] + bytes([text[at] ^ 1]) + text[at + 1 :]
    x, y = b"p" * offsets[0] + text, b"q" * offsets[1] + changed[:-5]

    length = common_length(x, offsets[0], y, offsets[1])

    assert length == (len(text) - 5 if at is None else at)

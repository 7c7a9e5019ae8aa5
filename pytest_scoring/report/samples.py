"""A batch's report folder while it is built, its samples, and finding them again to resume.

A batch (docs/cli.md#many-repositories) builds its scan folder in place under the report root,
as ``.scan_id=<id>.tmp`` (only the evaluator can enter it), and renames it to
``scan_id=<id>`` once every repository has its sample. ``_scan.json`` is written first and
carries the batch's key (a hash of the options and the reference). Each repository's worker
writes ``samples/<transcript id>/``: ``sample.json`` (its entry of ``samples[]``), its data
files (``diff.json``…), its page ``index.html`` and its ``junit.xml``, staged under a hidden
name and renamed when complete, so the folder always holds whole samples only.

That folder is the resume state (docs/report.md#batches). When the same batch runs again, the
newest folder with its key, finished or not, gives every sample whose inputs still match (the
repository's content, the options, the reference) and that completed; an unfinished one is
continued in place (a process killed mid-batch), a finished one is copied from (an
interrupted or complete scan stays as it was). Only folders and files that the evaluator's
own user owns and that no one else may write are read: a repository's processes, running as
another user, cannot plant a sample. Samples read back are taken before any repository of the
run starts; the report is then built from what this run holds, never read again from disk.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Iterator
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Any
from typing import Final

from pytest_scoring.core.score import DEFAULT_VALUE_CAP
from pytest_scoring.errors import OptionError
from pytest_scoring.errors import ReportError
from pytest_scoring.fs.leftovers import hold
from pytest_scoring.fs.leftovers import make_held
from pytest_scoring.fs.private import private_problem
from pytest_scoring.fs.private import read_private_json
from pytest_scoring.report.html import write_page
from pytest_scoring.report.inputs import SampleInputs
from pytest_scoring.report.result import BUILDING_SUFFIX
from pytest_scoring.report.result import SCAN_DIR_PREFIX
from pytest_scoring.report.result import SCORES_FILE
from pytest_scoring.report.result import SessionResult
from pytest_scoring.report.result import new_scan_id
from pytest_scoring.report.scout import SCAN_FILE
from pytest_scoring.report.scout import batch_key_of
from pytest_scoring.report.scout import own_scan_spec

#: The folder of the samples inside a batch's scan folder.
SAMPLES_DIR: Final = "samples"
SAMPLE_FILE: Final = "sample.json"
#: A repository's JUnit XML (``--junitxml``), in its sample folder.
JUNIT_FILE: Final = "junit.xml"


@dataclass(frozen=True)
class SampleTarget:
    """Where one repository's sample goes, and what names it."""

    #: ``samples/<id>`` in the batch's folder.
    folder: Path
    #: The transcript id (:func:`~pytest_scoring.report.inputs.transcript_id`).
    id: str
    inputs: SampleInputs

    @property
    def staging(self) -> Path:
        """Where its files are written before the sample is complete."""
        return self.folder.with_name(f".{self.folder.name}{BUILDING_SUFFIX}")

    def prepare(self) -> Path:
        """An empty staging folder (a leftover of a killed worker is removed first)."""
        shutil.rmtree(self.staging, ignore_errors=True)
        self.staging.mkdir(parents=True)
        return self.staging


def sample_entry(result: SessionResult, target: SampleTarget) -> dict[str, Any]:
    """A repository's entry of ``samples[]``: its ``scores.json`` content without the parts
    that belong to the scan, with its transcript id, its inputs and its files."""
    content = result.scores_json()
    for scan_part in ("format_version", "scan_id", "metrics"):
        content.pop(scan_part, None)
    files = sorted(
        [*result.files, *([JUNIT_FILE] if (target.staging / JUNIT_FILE).exists() else [])]
    )
    return {"id": target.id, **content, "inputs": target.inputs, "files": files}


def write_sample(
    target: SampleTarget, result: SessionResult, value_cap: int = DEFAULT_VALUE_CAP
) -> Path:
    """Write a repository's sample folder, with the page of that repository alone (the batch's
    page links to it), and return it.

    :raises ReportError: when a file cannot be written or a value cannot be encoded.
    """
    from pytest_scoring.core.encoding import encode_json
    from pytest_scoring.report.writer import encode_data_file
    from pytest_scoring.report.writer import write_evidence

    staging = target.staging if target.staging.is_dir() else target.prepare()
    try:
        files = result.files.items()
        texts = {name: encode_data_file(content, value_cap) for name, content in files}
        for name, text in texts.items():
            (staging / name).write_text(text, encoding="utf-8")
        write_evidence(staging, result.evidence)
        entry = encode_json(sample_entry(result, target))
        (staging / SAMPLE_FILE).write_text(entry, encoding="utf-8")
        write_page(staging, {SCORES_FILE: entry, **texts})
        shutil.rmtree(target.folder, ignore_errors=True)
        staging.rename(target.folder)
    except (OSError, ValueError, TypeError, RecursionError) as error:
        raise ReportError(
            f"cannot write the sample of {result.repository}: {type(error).__name__}: {error}"
        ) from error
    return target.folder


def read_sample(folder: Path) -> dict[str, Any] | None:
    """A sample's entry, or None when it is not one this evaluator wrote whole."""
    return read_private_json(folder, SAMPLE_FILE)


@dataclass
class BatchFolder:
    """The folder a batch is built in, held (locked) while the batch runs."""

    path: Path
    scan_id: str
    #: Entries kept from earlier runs of the batch, by transcript id.
    kept: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: The scan the kept samples were taken from, by transcript id (absent: this folder).
    kept_from: dict[str, str] = field(default_factory=dict)
    #: What killed runs had left in the report root and was removed, in one line.
    leftovers: str | None = None
    _lock: int | None = None

    @property
    def samples(self) -> Path:
        return self.path / SAMPLES_DIR

    def target(self, transcript: str, inputs: SampleInputs) -> SampleTarget:
        return SampleTarget(self.samples / transcript, transcript, inputs)

    def write_spec(self, spec: Mapping[str, Any]) -> None:
        """``_scan.json`` now, with the batch's key: the folder can be found to resume."""
        (self.path / SCAN_FILE).write_text(json.dumps(spec, indent=2) + "\n", encoding="utf-8")

    def finish(self, report_root: Path) -> Path:
        """Open the folder to readers and rename it to ``scan_id=<id>``; its final path."""
        mode = 0o777 & ~_umask()
        final = report_root / f"{SCAN_DIR_PREFIX}{self.scan_id}"
        try:
            for staging in self.samples.glob(f".*{BUILDING_SUFFIX}"):
                shutil.rmtree(staging, ignore_errors=True)  # a worker that was killed
            for folder in (self.path, self.samples, *_subfolders(self.samples)):
                folder.chmod(mode)
            self.path.rename(final)
        except OSError as error:
            raise ReportError(f"cannot finish the report {final}: {error.strerror}") from None
        finally:
            self.release()
        self.path = final
        return final

    def release(self) -> None:
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None


def open_batch_folder(
    report_root: Path, key: str, wanted: Mapping[str, SampleInputs]
) -> BatchFolder:
    """The folder to build the batch in, with the samples kept from earlier runs.

    :param key: the batch's key (:func:`~pytest_scoring.report.inputs.batch_key`).
    :param wanted: each repository's transcript id and inputs.
    :raises OptionError: when another process is scoring the same batch now.
    :raises ReportError: when the report root cannot be written.
    """
    from pytest_scoring.report.writer import remove_report_leftovers

    leftovers = remove_report_leftovers(report_root)
    sources = _earlier_runs(report_root, key)
    try:
        report_root.mkdir(parents=True, exist_ok=True)
        unfinished = [path for path in sources if path.name.endswith(BUILDING_SUFFIX)]
        folder = _continued(unfinished) if unfinished else None
        if folder is None:
            scan_id = new_scan_id()
            path = report_root / f".{SCAN_DIR_PREFIX}{scan_id}{BUILDING_SUFFIX}"
            path, lock = make_held(lambda: _made(path))
            folder = BatchFolder(path, scan_id, _lock=lock)
        folder.samples.mkdir(mode=0o700, exist_ok=True)
        folder.leftovers = leftovers
        _keep_samples(folder, sources, wanted)
    except OSError as error:
        raise ReportError(f"cannot build the report under {report_root}: {error}") from None
    return folder


def _made(path: Path) -> Path:
    path.mkdir(mode=0o700)
    return path


def _earlier_runs(report_root: Path, key: str) -> list[Path]:
    """Folders of the batch ``key`` under the report root (ours only), newest first."""
    found = []
    for path in [
        *report_root.glob(f".{SCAN_DIR_PREFIX}*"),
        *report_root.glob(f"{SCAN_DIR_PREFIX}*"),
    ]:
        spec = own_scan_spec(path)
        if spec is not None and batch_key_of(spec) == key:
            found.append((str(spec.get("timestamp") or ""), path))
    return [path for _, path in sorted(found, reverse=True)]


def _continued(unfinished: list[Path]) -> BatchFolder | None:
    """The newest unfinished folder of the batch, locked for this run.

    :raises OptionError: when a process still builds one of them.
    """
    locks = [hold(path) for path in unfinished]
    if None in locks:
        for lock in locks:
            if lock is not None:
                os.close(lock)
        busy = unfinished[locks.index(None)]
        raise OptionError(
            f"another pytest-scoring run is scoring the same repositories into {busy} now: "
            "wait for it to end, or give another --report"
        )
    for lock in locks[1:]:
        os.close(lock)  # type: ignore[arg-type]
    path = unfinished[0]
    scan_id = path.name.removeprefix(f".{SCAN_DIR_PREFIX}").removesuffix(BUILDING_SUFFIX)
    return BatchFolder(path, scan_id, _lock=locks[0])


def _keep_samples(
    folder: BatchFolder, sources: list[Path], wanted: Mapping[str, SampleInputs]
) -> None:
    """Keep each wanted sample that an earlier run completed with the same inputs; remove
    everything else from the folder (stale, incomplete, or not asked for any more)."""
    for path in _subfolders(folder.samples):
        entry = read_sample(path)
        if entry is not None and _matches(entry, wanted):
            folder.kept[entry["id"]] = entry
        else:
            shutil.rmtree(path, ignore_errors=True)
    for source in sources:
        if source == folder.path:
            continue
        for path in _subfolders(source / SAMPLES_DIR):
            entry = read_sample(path)
            if entry is None or entry["id"] in folder.kept or not _matches(entry, wanted):
                continue
            _copy_sample(path, folder.samples / path.name)
            folder.kept[entry["id"]] = entry
            folder.kept_from[entry["id"]] = source.name.removeprefix(SCAN_DIR_PREFIX)


def _matches(entry: Mapping[str, Any], wanted: Mapping[str, SampleInputs]) -> bool:
    transcript = entry.get("id")
    return (
        isinstance(transcript, str)
        and transcript in wanted
        and entry.get("inputs") == wanted[transcript]
        and entry.get("complete") is True
    )


def _copy_sample(source: Path, target: Path) -> None:
    """A kept sample's folder, hard-linked where the file system allows (its files are never
    written again), else copied."""
    staging = target.with_name(f".{target.name}{BUILDING_SUFFIX}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(mode=0o700)
    for path in source.iterdir():
        if private_problem(path) or not path.is_file():
            continue
        try:
            os.link(path, staging / path.name)
        except OSError:
            shutil.copy2(path, staging / path.name)
    staging.rename(target)


def _subfolders(folder: Path) -> Iterator[Path]:
    """The sample folders in ``folder`` (none when it is missing; staging folders left out)."""
    with contextlib.suppress(OSError):
        for path in sorted(folder.iterdir()):
            if not path.name.startswith(".") and path.is_dir() and not path.is_symlink():
                yield path


def _umask() -> int:
    current = os.umask(0o022)
    os.umask(current)
    return current

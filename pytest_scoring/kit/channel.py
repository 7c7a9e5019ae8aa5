"""The probe's channel: one authenticated line per record, only the probe holding the key.

PYTEST_DONT_REWRITE (pytest never rewrites or warns about this module, whatever the
repository's ``filterwarnings`` says).

The evaluator makes a fresh random key for every child run and hands it to the launcher
(:mod:`pytest_scoring.kit.launch`) on a descriptor, or in a file it deletes at once, before
any code of the repository runs; the launcher names the stream and the key in its arguments,
never in the environment. Every line on the wire is::

    MAC SEQ PREVIOUS JSON

* ``SEQ``: the line's number, 1 for the first, one more for each line after it;
* ``PREVIOUS``: the MAC of the line before (64 zeros for the first);
* ``JSON``: one record, a JSON object in ASCII (``{"type": "phase", …}``);
* ``MAC``: HMAC-SHA256 with the run's key over ``SEQ PREVIOUS JSON`` (the bytes after the
  MAC and its space), in lowercase hexadecimal.

The evaluator (``pytest_scoring.process.stream``) drops every line whose MAC does not
verify, and sees a gap, a repeat or a missing end record in the chain. Code in the child
cannot write a line that verifies without the key, and cannot change what the probe writes
through anything it can patch: this module is loaded under a name of its own, never in
``sys.modules``, with its own copy of the builtins, and it captures the C functions it calls
(SHA-256, the JSON encoder, ``os.write``) when it loads, before any repository code runs.
What the key stays reachable through is the probe's memory (docs/security.md).

Like all of the kit, it needs only the standard library and keeps to Python 3.8 syntax.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import json.encoder
import os
import sys
import threading
from collections.abc import Callable
from typing import Any

#: The C encoder: nothing of it can be patched from Python (None where the interpreter has
#: none: then the pure-Python one is used).
_c_make_encoder: Any = getattr(json.encoder, "c_make_encoder", None)
_c_ascii: Any = getattr(json.encoder, "c_encode_basestring_ascii", None)

#: Bytes of a run's key.
KEY_BYTES = 32
#: Characters of a MAC on the wire (SHA-256 in hexadecimal).
MAC_CHARS = 64
#: ``PREVIOUS`` of the first line.
FIRST_PREVIOUS = "0" * MAC_CHARS
_BLOCK = 64  # SHA-256's block size: HMAC pads the key to it
_sha256 = hashlib.sha256
_getpid = os.getpid
_write = os.write
_close = os.close
#: The audit event every record raises before it is sent: the tripwire's self-check runs on
#: it (``pytest_scoring.kit.tripwire.RECORD_EVENT``), whatever the probe's hooks became.
RECORD_EVENT = "pytest-scoring.record"
_audit = getattr(sys, "audit", lambda event, *args: None)


class ChannelError(Exception):
    """The key or the stream the launcher was given cannot be used."""


def parse_key(text: bytes) -> bytes:
    """The key from its hexadecimal text (what the evaluator writes)."""
    try:
        key = bytes.fromhex(text.decode("ascii").strip())
    except (UnicodeDecodeError, ValueError):
        key = b""
    if len(key) != KEY_BYTES:
        raise ChannelError(f"the key is not {KEY_BYTES} bytes in hexadecimal")
    return key


def read_key_descriptor(descriptor: int) -> bytes:
    """Read the key to its end from ``descriptor`` (a pipe the evaluator wrote), then close it."""
    chunks = []
    try:
        while True:
            chunk = os.read(descriptor, 4096)
            if not chunk:
                break
            chunks.append(chunk)
    except OSError as error:
        raise ChannelError(f"cannot read the key from descriptor {descriptor}: {error}") from None
    finally:
        with contextlib.suppress(OSError):
            os.close(descriptor)
    return parse_key(b"".join(chunks))


def stream_descriptor(descriptor: int) -> int:
    """The inherited stream descriptor, made non-inheritable: no program the tests start
    gets it."""
    try:
        os.set_inheritable(descriptor, False)
    except OSError as error:
        raise ChannelError(f"descriptor {descriptor} is not open: {error.strerror}") from None
    return descriptor


def keyed_mac(key: bytes) -> Callable[[bytes], str]:
    """HMAC-SHA256 with ``key``, built from two SHA-256 states computed now (RFC 2104).

    The states are C objects whose methods nothing can replace, so a repository that patches
    ``hmac`` or ``hashlib`` neither learns the key nor changes a MAC.
    """
    padded = (_sha256(key).digest() if len(key) > _BLOCK else key).ljust(_BLOCK, b"\0")
    inner = _sha256(bytes(byte ^ 0x36 for byte in padded))
    outer = _sha256(bytes(byte ^ 0x5C for byte in padded))

    def mac(message: bytes) -> str:
        digest = inner.copy()
        digest.update(message)
        final = outer.copy()
        final.update(digest.digest())
        return final.hexdigest()

    return mac


def make_encoder() -> Callable[[Any], str]:
    """A record as one line of ASCII JSON (anything JSON cannot hold becomes its ``repr``)."""
    if _c_make_encoder is None or _c_ascii is None:
        return json.JSONEncoder(default=repr).encode
    make, ascii_text, text_repr, join = _c_make_encoder, _c_ascii, repr, "".join

    def encode(record: Any) -> str:
        # A new encoder each time: one that failed (a circular value) keeps stale markers.
        encoder = make({}, text_repr, ascii_text, None, ": ", ", ", False, False, True)
        return join(encoder(record, 0))

    return encode


class Channel:
    """The probe's side of the channel: :meth:`send` numbers, chains and signs each record.

    Nothing here is looked up on a class or a shared module when a line is sent: the hooks
    hold :attr:`send` and :attr:`close` themselves, closures over the key's states.
    """

    def __init__(self, key: bytes, descriptor: int) -> None:
        mac, encode = keyed_mac(key), make_encoder()
        owner, lock = _getpid(), threading.Lock()
        getpid, write, close_descriptor, suppress = _getpid, _write, _close, contextlib.suppress
        audit, event = _audit, RECORD_EVENT
        seq, previous, is_open = 0, FIRST_PREVIOUS, True

        def write_all(data: bytes) -> None:
            view = memoryview(data)
            while view:
                view = view[write(descriptor, view) :]

        def send(record: Any) -> None:
            """Write one record; silent in a forked child (its parent's probe reports)."""
            nonlocal seq, previous, is_open
            if getpid() != owner:
                return
            audit(event, record)  # first the self-check's own records (docs/security.md)
            try:
                text = encode(record)
            except (TypeError, ValueError, RecursionError) as error:
                text = encode({"type": "unencodable", "error": repr(error)})
            with lock:
                if not is_open:
                    return
                rest = f"{seq + 1} {previous} {text}"
                signature = mac(rest.encode("ascii"))
                try:
                    write_all(f"{signature} {rest}\n".encode("ascii"))
                except OSError:  # the reader is gone: the tests still run to their end
                    is_open = False
                    return
                seq, previous = seq + 1, signature

        def close() -> None:
            """No line after this one (the end record): the descriptor is closed."""
            nonlocal is_open
            if getpid() != owner:
                return
            with lock:
                if is_open:
                    is_open = False
                    with suppress(OSError):
                        close_descriptor(descriptor)

        self.send = send
        self.close = close
        #: The encoder ``send`` uses (the probe checks values of the tests' own with it).
        self.encode = encode


def open_channel(stream_fd: int | None = None, key_fd: int | None = None) -> Channel | None:
    """The channel the launcher's arguments name: a stream descriptor and a key descriptor
    (inherited from ``run``'s supervisor, or in a sandbox from the helper's); None when they
    name none.

    :raises ChannelError: when they name one that cannot be used.
    """
    if stream_fd is not None and key_fd is not None:
        key = read_key_descriptor(key_fd)
        return Channel(key, stream_descriptor(stream_fd))
    if (stream_fd, key_fd) != (None, None):
        raise ChannelError("a stream needs its key (and a key its stream)")
    return None

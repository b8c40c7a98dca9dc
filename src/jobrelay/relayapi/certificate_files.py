"""The API's certificate files, re-read as they change (``--api-cert-file``, ``--api-key-file``,
``--api-ca-file``, every ``--api-cert-reload-interval``).

A kubelet updates a mounted Secret by writing a new timestamped directory and swapping
the ``..data`` symlink its files point through (cert-manager renewing the Secret, an
operator replacing it): a file's own mtime says nothing, so the content is compared.
A changed set is served from the next handshake on once the certificate and key load
together and the CA signs the certificate; a half-swapped read (the certificate of one
version, the key of the next) fails that check and is read again next time; a set that
stays wrong is logged once and the current certificate kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Callable
from pathlib import Path

__all__ = ["CertificateFiles", "ServedFiles"]

_log = logging.getLogger(__name__)

# (certificate, key, CA): PEMs as read.
ServedFiles = tuple[bytes, bytes, bytes]


class CertificateFiles:
    """Polls the three files; ``serve`` gets each new set and raises (ValueError,
    ssl.SSLError) when it cannot serve it."""

    def __init__(
        self,
        cert_file: str,
        key_file: str,
        ca_file: str,
        current: ServedFiles,
        serve: Callable[[ServedFiles], None],
        *,
        interval: float,
    ) -> None:
        self._paths = (Path(cert_file), Path(key_file), Path(ca_file or cert_file))
        self._current = current
        self._refused: ServedFiles | None = None
        self._serve = serve
        self._interval = interval
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name="api certificate files"
        )

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            await self.check()

    def _read(self) -> ServedFiles:
        cert, key, ca = (path.read_bytes() for path in self._paths)
        return cert, key, ca

    async def check(self) -> bool:
        """Read the files once; serve them when they changed and check out. True when a
        new set is served."""
        try:
            found = await asyncio.to_thread(self._read)
        except OSError as error:  # between a kubelet's swap and its clean-up, or gone
            _log.debug("cannot read the API certificate files: %s", error)
            return False
        if found == self._current:
            return False
        try:
            self._serve(found)
        except (ValueError, ssl.SSLError) as error:
            if found != self._refused:  # said once per content, tried again each time
                _log.warning("not serving the changed API certificate files: %s", error)
                self._refused = found
            return False
        self._current, self._refused = found, None
        _log.info("serving the renewed API certificate (%s)", self._paths[0],
                  extra={"event": "api-certificate-loaded"})  # fmt: skip
        return True

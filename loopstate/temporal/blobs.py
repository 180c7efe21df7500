"""Payloads past a size passed by reference (the claim-check pattern), so a long transcript
never meets Temporal's payload limit (2 MB by default) and never wedges a run.

`BlobCodec` runs in the client and the workers, outside the workflow: a payload over
`threshold` bytes is written to a `BlobStore` under its SHA-256 and replaced by a small
reference; decoding reads it back. Content-addressed, so writing twice is harmless and any
worker that shares the store can read what another wrote.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

from loopstate.engine.errors import StoreError

REFERENCE = b"loopstate/blob-ref"
DEFAULT_THRESHOLD = 128 * 1024


class BlobStore(Protocol):
    async def put(self, key: str, data: bytes) -> None: ...
    async def get(self, key: str) -> bytes: ...


class DirectoryBlobs:
    """Blobs as files in a directory every worker and client can read (a shared volume)."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)

    async def put(self, key: str, data: bytes) -> None:
        await asyncio.to_thread(self._put, key, data)

    async def get(self, key: str) -> bytes:
        try:
            return await asyncio.to_thread((self.directory / key).read_bytes)
        except FileNotFoundError:
            raise StoreError(f"blob {key} is missing from {self.directory}") from None

    def _put(self, key: str, data: bytes) -> None:
        path = self.directory / key
        if path.exists():
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.part")
        partial.write_bytes(data)
        partial.replace(path)  # atomic: a reader never sees half a blob


class BlobCodec(PayloadCodec):
    def __init__(self, blobs: BlobStore, *, threshold: int = DEFAULT_THRESHOLD) -> None:
        self.blobs = blobs
        self.threshold = threshold

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [await self._encode(p) for p in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [await self._decode(p) for p in payloads]

    async def _encode(self, payload: Payload) -> Payload:
        data = payload.SerializeToString()
        if len(data) <= self.threshold:
            return payload
        key = hashlib.sha256(data).hexdigest()
        await self.blobs.put(key, data)
        return Payload(metadata={"encoding": REFERENCE}, data=key.encode())

    async def _decode(self, payload: Payload) -> Payload:
        if payload.metadata.get("encoding") != REFERENCE:
            return payload
        key = payload.data.decode()
        data = await self.blobs.get(key)
        if hashlib.sha256(data).hexdigest() != key:
            raise StoreError(f"blob {key} does not match its digest")
        decoded = Payload()
        decoded.ParseFromString(data)
        return decoded

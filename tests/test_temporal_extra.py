"""The temporal extra's blob codec passes big payloads by reference. (That `import loopstate` and
its CLI's parser do not import temporalio is checked with the other extras in
tests/test_public_api.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.api.common.v1 import Payload

from loopstate import StoreError
from loopstate.temporal import BlobCodec, DirectoryBlobs


async def test_a_payload_past_the_threshold_travels_by_reference_and_comes_back(
    tmp_path: Path,
) -> None:
    codec = BlobCodec(DirectoryBlobs(tmp_path), threshold=100)
    small = Payload(metadata={"encoding": b"json/plain"}, data=b"1")
    big = Payload(metadata={"encoding": b"json/plain"}, data=b'"' + b"x" * 1000 + b'"')
    encoded = await codec.encode([small, big])
    assert encoded[0] == small
    assert len(encoded[1].data) == 64  # a SHA-256, not the payload
    assert await codec.decode(encoded) == [small, big]
    [blob] = tmp_path.iterdir()
    blob.write_bytes(b"tampered")
    with pytest.raises(StoreError, match="does not match its digest"):
        await codec.decode(encoded)

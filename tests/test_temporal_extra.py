"""The temporal extra stays optional, and its blob codec passes big payloads by reference."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from temporalio.api.common.v1 import Payload

from loopstate import StoreError
from loopstate.temporal import BlobCodec, DirectoryBlobs


def test_importing_loopstate_or_building_its_cli_does_not_import_temporalio() -> None:
    code = (
        "import sys, loopstate; from loopstate.cli import build_parser; build_parser(); "
        "print('temporalio' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


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

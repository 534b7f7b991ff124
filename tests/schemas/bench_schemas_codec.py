"""Codec timings on ~20 KB captures, beside raw fastavro on the same data (run by hand).

    python tests/schemas/bench_schemas_codec.py

Baselines: "fastavro write/read" is schemaless_writer/reader on the already-converted Avro
datum, i.e. the floor the codec adds its JSON-form conversion to. "native_encode" is what the
producer runs (``producers.avro``: the native core's writer, same bytes).
"""

from __future__ import annotations

import io
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from fastavro import schemaless_reader, schemaless_writer
from schemas_testdata import busy_capture, padded_example

from producers.avro import encode_capture as native_encode
from schemas import codec
from schemas.codec import _capture_to_avro
from schemas.models import Capture


def best_us(fn: Callable[[], Any], *, number: int = 2000, repeat: int = 5) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - start) / number)
    return best * 1e6


def measure(capture: dict[str, Any]) -> dict[str, float]:
    schema = codec.LATEST_SCHEMAS["capture"].parsed
    data = codec.encode_capture(capture)
    datum = _capture_to_avro(capture)
    body = data[10:]

    def raw_write() -> bytes:
        buffer = io.BytesIO()
        schemaless_writer(buffer, schema, datum)
        return buffer.getvalue()

    return {
        "json_bytes": len(json.dumps(capture, ensure_ascii=False).encode("utf-8")),
        "avro_bytes": len(data),
        "encode_capture_us": best_us(lambda: codec.encode_capture(capture)),
        "native_encode_us": best_us(lambda: native_encode(capture)),
        "fastavro_write_us": best_us(raw_write),
        "decode_us": best_us(lambda: codec.decode(data)),
        "fastavro_read_us": best_us(lambda: schemaless_reader(io.BytesIO(body), schema, None)),
        "pydantic_from_json_us": best_us(lambda: Capture.from_json(capture), number=300),
    }


def main() -> None:
    builds = (("padded example", padded_example), ("busy capture", busy_capture))
    for name, build in (*builds, ("padded 120 KB", lambda: padded_example(120_000))):
        result = measure(build())
        print(name, json.dumps({k: round(v, 1) for k, v in result.items()}))


if __name__ == "__main__":
    main()

"""The ingest loop's commit discipline, with fakes (the spool source itself: tests/producers/transports)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pytest

from consumers.ingest.batch import BatchResult
from consumers.ingest.loop import IngestLoop, LoopConfig, kill_at
from producers.transports.base import SourceMessage
from schemas.errors import BlobStoreError


@dataclass
class FakeSource:
    batches: list[list[SourceMessage]]
    commits: list[dict[object, int]] = field(default_factory=list)
    log: list[str] = field(default_factory=list)
    topic: str = "t"
    owned: bool = True

    def consume(self, max_messages: int, timeout: float) -> Sequence[SourceMessage]:
        return self.batches.pop(0) if self.batches else []

    def commit(self, offsets: dict[object, int]) -> bool:
        self.log.append("commit")
        self.commits.append(dict(offsets))
        return True

    def caught_up(self) -> bool:
        return not self.batches

    def keepalive(self, seconds: float) -> None:
        self.log.append("keepalive")

    def resume(self) -> None:
        pass

    def owns(self, partitions: object) -> bool:
        return self.owned

    def rewind(self, offsets: object) -> None:
        self.log.append("rewind")

    def close(self) -> None:
        pass


@dataclass
class FakeProcessor:
    log: list[str]
    failures: int = 0

    def process(
        self, batch: Sequence[SourceMessage], *, hook: Callable[[str], None] | None = None
    ) -> BatchResult:
        if self.failures:
            self.failures -= 1
            self.log.append("fail")
            raise BlobStoreError("minio paused")
        self.log.append("segments")
        if hook:
            hook("after_segments")
        self.log.append("index")
        return BatchResult(messages=len(batch), indexed=len(batch))


def _msgs(partition: int, offsets: range) -> list[SourceMessage]:
    return [SourceMessage("t", partition, o, None, b"") for o in offsets]


def test_commit_comes_after_durable_writes_and_drain_stops() -> None:
    src = FakeSource([_msgs(0, range(0, 3)) + _msgs(1, range(5, 7)), _msgs(0, range(3, 4))])
    proc = FakeProcessor(src.log)
    stats = IngestLoop(source=src, processor=proc, config=LoopConfig(drain_idle=0)).run(drain=True)  # type: ignore[arg-type]
    assert src.log == ["segments", "index", "commit", "segments", "index", "commit"]
    assert src.commits == [{0: 3, 1: 7}, {0: 4}]
    assert (stats.batches, stats.messages, stats.commits) == (2, 6, 2)


def test_sink_failure_retries_the_same_batch_without_committing() -> None:
    src = FakeSource([_msgs(0, range(2))])
    proc = FakeProcessor(src.log, failures=2)
    cfg = LoopConfig(drain_idle=0, retry_initial=0.0)
    stats = IngestLoop(source=src, processor=proc, config=cfg).run(drain=True)  # type: ignore[arg-type]
    assert src.log == ["fail", "keepalive", "fail", "keepalive", "segments", "index", "commit"]
    assert stats.retries == 2 and src.commits == [{0: 2}]


def test_batch_abandoned_when_partitions_move_away() -> None:
    src = FakeSource([_msgs(0, range(2))])
    src.owned = False
    proc = FakeProcessor(src.log, failures=1)
    cfg = LoopConfig(drain_idle=0, retry_initial=0.0)
    stats = IngestLoop(source=src, processor=proc, config=cfg).run(drain=True)  # type: ignore[arg-type]
    assert src.log == ["fail", "keepalive", "rewind"]
    assert stats.abandoned_batches == 1 and src.commits == []


def test_unknown_fault_point_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown fault point"):
        kill_at("before_lunch")
    kill_at(None)("after_segments")  # no fault configured: a no-op

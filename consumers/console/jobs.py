"""Replay jobs of the serve process: a bounded pool, a queue with positions, progress, cancel.

A job runs in the server, not in the page: closing the page leaves it running, and its result waits
for its owner (the console session's caller) to come back. Only the caller who started a job sees or
cancels it. Cancel takes effect at once for a queued job and between replays for a running one (a
replay in flight finishes; nothing half-written reaches ``replay_runs``). Finished jobs are kept, the
newest :data:`KEPT` of them, in memory: the durable record is ``replay_runs`` and the access log.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Literal

from schemas.errors import BlackboxError

__all__ = ["JobCancelled", "JobControl", "JobView", "ReplayJobs"]

log = logging.getLogger("blackbox.console.jobs")

State = Literal["queued", "running", "done", "failed", "cancelled"]
KEPT = 200


class JobCancelled(BlackboxError):
    """The job's owner cancelled it; raised between replays."""


@dataclass(frozen=True, slots=True)
class JobView:
    """What a page shows of a job at one moment."""

    job_id: str
    owner: str
    decision_id: str
    label: str
    state: State
    done: int
    total: int
    position: int | None
    """Place in the queue (1 = next to start) while queued, else None."""
    result: Any = None
    error: str = ""
    partial: Any = None
    """What the work published so far (a probe's points as they finish), until its result."""

    @property
    def finished(self) -> bool:
        return self.state in ("done", "failed", "cancelled")


class _Job:
    def __init__(self, *, job_id: str, owner: str, decision_id: str, label: str, total: int) -> None:
        self.job_id, self.owner, self.decision_id, self.label = job_id, owner, decision_id, label
        self.state: State = "queued"
        self.done, self.total = 0, total
        self.result: Any = None
        self.partial: Any = None
        self.error = ""
        self.cancel = threading.Event()
        self.future: Future[None] | None = None


class JobControl:
    """Handed to the work: report a step done, and stop if the owner cancelled."""

    def __init__(self, job: _Job, lock: threading.Lock) -> None:
        self._job, self._lock = job, lock

    def check(self) -> None:
        if self._job.cancel.is_set():
            raise JobCancelled("cancelled by its owner")

    def plan(self, total: int) -> None:
        """How many steps the job expects, once it knows."""
        with self._lock:
            self._job.total = total

    def publish(self, partial: Any) -> None:
        """Show ``partial`` (an immutable value) on the job's page while the job runs."""
        with self._lock:
            self._job.partial = partial

    def step(self) -> None:
        with self._lock:
            self._job.done += 1
        self.check()


class ReplayJobs:
    """At most ``workers`` jobs run at once; the rest wait in submission order."""

    def __init__(self, *, workers: int = 2) -> None:
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="console-replay")
        self._lock = threading.Lock()
        self._jobs: OrderedDict[str, _Job] = OrderedDict()

    def submit(
        self, *, owner: str, decision_id: str, label: str, total: int, work: Callable[[JobControl], Any]
    ) -> str:
        job = _Job(
            job_id=f"job_{uuid.uuid4().hex[:16]}",
            owner=owner,
            decision_id=decision_id,
            label=label,
            total=total,
        )
        with self._lock:
            self._jobs[job.job_id] = job
            self._forget_old()
        job.future = self._pool.submit(self._run, job, work)
        return job.job_id

    def view(self, job_id: str, *, owner: str) -> JobView | None:
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None or job.owner != owner:
                return None
            queued = [j.job_id for j in self._jobs.values() if j.state == "queued"]
            return JobView(
                job_id=job.job_id,
                owner=job.owner,
                decision_id=job.decision_id,
                label=job.label,
                state=job.state,
                done=job.done,
                total=job.total,
                position=queued.index(job.job_id) + 1 if job.state == "queued" else None,
                result=job.result,
                error=job.error,
                partial=job.partial,
            )

    def wait(self, job_id: str, *, owner: str, seconds: float) -> None:
        """Wait up to ``seconds`` for the job to finish (a quick replay then shows its verdict on the
        first page load instead of after a refresh)."""
        with self._lock:
            job = self._jobs.get(job_id)
            future = job.future if job is not None and job.owner == owner else None
        if future is not None:
            wait([future], timeout=seconds)

    def cancel(self, job_id: str, *, owner: str) -> bool:
        """Ask the job to stop; False when it is not this owner's or already finished."""
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None or job.owner != owner or job.state in ("done", "failed", "cancelled"):
                return False
            job.cancel.set()
            if job.state == "queued":
                job.state = "cancelled"
                job.error = "cancelled before it started"
        return True

    def close(self) -> None:
        with self._lock:
            for job in self._jobs.values():
                job.cancel.set()
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _run(self, job: _Job, work: Callable[[JobControl], Any]) -> None:
        with self._lock:
            if job.cancel.is_set():
                return
            job.state = "running"
        state: State = "done"
        error, result = "", None
        try:
            result = work(JobControl(job, self._lock))
        except JobCancelled as exc:
            state, error = "cancelled", str(exc)
        except BlackboxError as exc:
            state, error = "failed", f"{type(exc).__name__}: {exc}"
        except Exception as exc:  # a job's failure is shown on its page, never lost in a thread
            log.error("console replay job %s failed", job.job_id, exc_info=exc)
            state, error = "failed", f"{type(exc).__name__}: {exc}"
        with self._lock:
            job.state, job.error, job.result = state, error, result

    def _forget_old(self) -> None:
        finished = [k for k, j in self._jobs.items() if j.state in ("done", "failed", "cancelled")]
        for key in finished[: max(0, len(self._jobs) - KEPT)]:
            del self._jobs[key]

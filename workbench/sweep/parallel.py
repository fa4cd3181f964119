"""`--parallel`: several server configurations measured at once on one machine, one per device group.

The driver thread (the caller of `run_parallel`) is the only one that writes the results store: each
configuration runs in a worker thread that holds one device group (`workbench.serving.device_groups`)
for as long as its server lives, and hands every finished point back through a queue; the driver
yields it to the store as it arrives. So resuming, SIGKILL safety and "no finished point lost" are
exactly those of a serial sweep: a point is either appended whole by the driver or not at all.

Why threads, not processes: the servers are separate processes already (the work is theirs); a
worker thread only waits on HTTP and runs the load generator's event loop. And every server stays a
child of the driver, so its orphan guard fires when the driver dies, however it dies.

Stopping: when the consumer stops early (an exception, a closed generator) the workers are told to
stop at their next point boundary and their servers are stopped; on Ctrl-C the driver does not wait
for them (the process is ending: started servers stop at exit, servers still starting are stopped by
their orphan guards).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from workbench.serving.device_groups import DeviceGroup, DevicePool, group_size
from workbench.sweep.measure import ConfigMeasurer
from workbench.sweep.spec import SweepPoint
from workbench.sweep.store import PointResult


@dataclass(frozen=True)
class _Point:
    result: PointResult


@dataclass(frozen=True)
class _Done:
    group: DeviceGroup
    error: BaseException | None


def _worker(
    measurer: ConfigMeasurer, points: Sequence[SweepPoint], group: DeviceGroup, out: queue.Queue, stop: threading.Event
) -> None:
    """Measure one configuration in `group`; hand each point back; always report done (and the error)."""
    error: BaseException | None = None
    results = measurer.results(points, group)
    try:
        for result in results:
            out.put(_Point(result))
            if stop.is_set():
                break
    except BaseException as exc:  # handed to the driver, which re-raises it
        error = exc
    finally:
        results.close()  # stops the server if the loop ended early
        out.put(_Done(group, error))


def run_parallel(
    measurer: ConfigMeasurer,
    configs: Sequence[Sequence[SweepPoint]],
    pool: DevicePool,
    status: Callable[[str], None] | None = None,
) -> Iterator[PointResult]:
    """Yield every point of `configs` (one list of points per server) as soon as any group finishes it.

    Configurations start in sweep order whenever a group that fits them is free (a smaller one may
    go ahead of a larger one still waiting for cards). The first worker error stops the others and
    is raised here, in the driver, after their servers are down.
    """
    pool.check_fits([c[0].recipe for c in configs])
    waiting = [list(c) for c in configs]
    out: queue.Queue = queue.Queue()
    stop = threading.Event()
    threads: list[threading.Thread] = []
    running, error, interrupted = 0, None, False
    try:
        while waiting or running:
            while not stop.is_set() and (launched := _launch_next(measurer, waiting, pool, out, stop)):
                threads.append(launched)
                running += 1
                if status:
                    status(f"{running} servers running, {len(waiting)} configurations waiting")
            message = out.get()
            if isinstance(message, _Point):
                yield message.result
                continue
            pool.release(message.group)
            running -= 1
            if message.error is not None and error is None:
                error = message.error
                stop.set()
                waiting.clear()
        if error is not None:
            raise error
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        stop.set()
        if not interrupted:
            for thread in threads:
                thread.join()


def _launch_next(
    measurer: ConfigMeasurer, waiting: list[list[SweepPoint]], pool: DevicePool, out: queue.Queue, stop: threading.Event
) -> threading.Thread | None:
    """Start the first waiting configuration a free group fits; None when none fits right now."""
    for index, points in enumerate(waiting):
        group = pool.acquire(group_size(points[0].recipe))
        if group is None:
            continue
        waiting.pop(index)
        thread = threading.Thread(
            target=_worker, args=(measurer, points, group, out, stop), name=f"sweep-{group.group_id}", daemon=True
        )
        thread.start()
        return thread
    return None

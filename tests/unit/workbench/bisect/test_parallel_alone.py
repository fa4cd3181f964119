"""Bisect with a device pool: the alone steps run at once in distinct groups, one thread writes, same verdicts.

The scripted probe (tests/unit/workbench/bisect/test_runner.py) stands in for real servers; a real parallel
sweep runs in tests/integration/test_parallel_sweep.py.
"""

from __future__ import annotations

import threading
import time

from tests.unit.workbench.bisect.test_runner import ScriptedProbe, setup  # noqa: F401  (the fixture)
from workbench.bisect.runner import Bisect
from workbench.recipes import DeviceKind
from workbench.serving.device_groups import make_pool


class GroupedProbe(ScriptedProbe):
    """The scripted probe, taking its device group and holding it for a moment; records overlap."""

    def __init__(self, script):
        super().__init__(script)
        self.lock = threading.Lock()
        self.live: dict[str, tuple[int, ...]] = {}
        self.max_live, self.shared, self.groups = 0, False, {}

    def __call__(self, recipe, kind, features, key, log_dir, group=None):
        if group is not None:
            with self.lock:
                self.shared |= bool({d for g in self.live.values() for d in g} & set(group.devices))
                self.live[key] = group.devices
                self.max_live = max(self.max_live, len(self.live))
                self.groups[key] = group.group_id
            time.sleep(0.1)
            with self.lock:
                del self.live[key]
        with self.lock:
            return super().__call__(recipe, kind, features, key, log_dir)


def test_alone_steps_run_side_by_side_with_the_serial_verdict(setup):  # noqa: F811
    recipe, plan, out = setup
    probe = GroupedProbe({"b": "crash", "c": "wrong"})
    writers: list[str] = []
    bisect = Bisect(recipe, plan, out, probe=probe, pool=make_pool(DeviceKind.CPU, 2, cores=(0, 1)))
    append = bisect.store.append
    bisect.store.append = lambda record: (writers.append(threading.current_thread().name), append(record))
    verdict = bisect.run(progress=False)

    serial = Bisect(recipe, plan, out.parent / "serial", probe=ScriptedProbe({"b": "crash", "c": "wrong"}))
    expected = serial.run(progress=False)
    assert (verdict.status, verdict.culprits) == (expected.status, expected.culprits) == ("culprits", ("b", "c"))
    assert probe.max_live == 2 and not probe.shared  # two servers at once, never on one core
    assert probe.groups.keys() == {"a", "b", "c"} and "baseline" not in probe.groups  # baseline ran first, alone
    assert set(writers) == {threading.current_thread().name}
    stored = [line for line in bisect.store.path.read_text().splitlines() if line]
    assert len(stored) == 5  # baseline, a, b, c, q (skipped): each once

    again = GroupedProbe({})
    rerun = Bisect(recipe, plan, out, probe=again, pool=make_pool(DeviceKind.CPU, 2, cores=(0, 1))).run(progress=False)
    assert again.calls == [] and rerun.culprits == ("b", "c")  # resumed from steps.jsonl

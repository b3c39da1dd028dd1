"""The walk of one observed-state PUT and the pass it queues, traced call by call through our
own modules: the pass's stages are entered once each, in order (observe, diff, plan, correct,
verify, settle), and no stage calls back up into the controller or the jobs.

`python -m pytest tests/reconciliation/test_pass_walk.py -s` prints the walk."""

import sys
from pathlib import Path

import django_rq
import pytest

from reconciliation.models import Finding
from tests.conftest import ROOT, approved_with_client

pytestmark = pytest.mark.django_db

STAGES = ("observe", "diff", "plan", "correct", "verify", "settle")
PURE = {"diff", "plan"}  # pure functions a later stage may use as a library (not re-run)
RECONCILER = ROOT / "reconciliation" / "reconciler"
# A stage never reaches these: queueing the next pass is the controller's, after the pass.
UP = {ROOT / "reconciliation" / "jobs.py",
      ROOT / "reconciliation" / "controller" / "handler.py",
      ROOT / "reconciliation" / "controller" / "triggers.py"}


def module_of(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


class Walk:
    """Calls into our modules (not tests, not installed packages), by module."""

    def __init__(self) -> None:
        self.modules: list[str] = []  # each module entered, consecutive repeats collapsed
        self.stages: list[str] = []  # each stage's public functions entered from outside it
        self.up: list[str] = []  # calls up into the controller or jobs from inside a stage

    def __call__(self, frame, event, arg) -> None:
        if event != "call":
            return
        path = Path(frame.f_code.co_filename)
        if not path.is_relative_to(ROOT) or path.is_relative_to(ROOT / "tests") or (
                ".venv" in path.parts):
            return
        module = module_of(path)
        if not self.modules or self.modules[-1] != module:
            self.modules.append(module)
        caller = Path(frame.f_back.f_code.co_filename) if frame.f_back else None
        in_stage = caller is not None and caller.parent == RECONCILER and caller.stem in STAGES
        if path in UP and self._inside_a_stage(frame):
            self.up.append(f"{module}.{frame.f_code.co_qualname}")
        if path.parent != RECONCILER or path.stem not in STAGES or caller == path:
            return
        code = frame.f_code
        if "." in code.co_qualname or code.co_name.startswith("_"):
            return  # a method of a value it passes on, or a private helper another module uses
        if path.stem in PURE and in_stage:
            return  # a later stage using a pure function (verify diffs its fresh observation)
        if not self.stages or self.stages[-1] != path.stem:
            self.stages.append(path.stem)

    @staticmethod
    def _inside_a_stage(frame) -> bool:
        frame = frame.f_back
        while frame is not None:
            path = Path(frame.f_code.co_filename)
            if path.parent == RECONCILER and path.stem in STAGES:
                return True
            frame = frame.f_back
        return False


def traced(walk: Walk, work) -> None:
    sys.setprofile(walk)
    try:
        work()
    finally:
        sys.setprofile(None)


def test_a_put_and_its_pass_walk_the_stages_once_each_in_order(
        people, redis_client, django_capture_on_commit_callbacks):
    agent, client = approved_with_client(people, enforcement={"default": "correct"},
                                         connector={"type": "push"})
    spec = agent.active_version.spec
    report = {**{k: v for k, v in spec.items() if k != "enforcement"}, "running": True,
              "tools": [*spec["tools"], "crm.search"]}  # a tool it was never approved for
    walk = Walk()

    def put() -> None:
        with django_capture_on_commit_callbacks(execute=True):
            answer = client.put(f"/api/v1/agents/{agent.name}/observed-state", report,
                                format="json")
        assert answer.status_code == 202, answer.content

    traced(walk, put)
    (job,) = [job for job in django_rq.get_queue("reconcile").get_jobs()
              if job.args[:2] == (agent.pk, "observation")]
    traced(walk, job.perform)

    print("\nmodules, in call order:\n  " + "\n  ".join(walk.modules))
    print("stages: " + " -> ".join(walk.stages))
    assert Finding.objects.filter(agent=agent).exists()  # the pass found and acted on drift
    left = [stage for index, stage in enumerate(walk.stages) if stage in walk.stages[:index]]
    assert not left, f"the walk returned to {left}: {walk.stages}"
    assert walk.stages == list(STAGES), walk.stages
    assert not walk.up, f"a stage called up into the controller: {walk.up}"

"""The spec's performance requirements beside what this sandbox run measured (runs last).

Each requirement is measured by the steps of the earlier scenario parts that make it up; on one machine
without kubelet or a container runtime these are the suite's own shares of each path (pod network:
CNI ADD through `prismnet`; LoadBalancer IP: Service applied to address in its status; volume:
CreateVolume through publish to a pod path; DNS: Service change to the new answer). The rows are
informational: a figure over its target is marked OVER, never a failed sandbox (benchmarks, not timed
tests: `make bench` has the distributions).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from nodeenv.scenario import Scenario, StepResult


@dataclass(frozen=True)
class Requirement:
    name: str
    target_s: float
    steps: tuple[str, ...]  # prefixes of the step names whose times add up to one measurement
    per: int = 1  # the steps measure this many at once (e.g. 3 pods)


REQUIREMENTS = (
    Requirement("pod network ready (spec: pod creation < 10 s)", 10.0, ("cni: ADD 3 pods",), per=3),
    Requirement(
        "LoadBalancer IP allocated (spec < 5 s)", 5.0, ("fiberlb: LoadBalancer address in the Service",)
    ),
    Requirement(
        "PersistentVolume provisioned and mounted (spec < 30 s)",
        30.0,
        ("csi: create a 1 GiB volume", "csi: publish to the node, stage and publish"),
    ),
    Requirement(
        "DNS record updated (spec < 10 s)", 10.0, ("flashdns: the answer changes after the Service",)
    ),
)


def measure(req: Requirement, results: Sequence[StepResult]) -> float | None:
    """Seconds for one measurement, or None when a step it needs did not run or failed."""
    total = 0.0
    for prefix in req.steps:
        found = [r for r in results if r.name.startswith(prefix) and r.ok]
        if not found:
            return None
        total += found[0].seconds
    return total / req.per


def rows(results: Sequence[StepResult]) -> list[StepResult]:
    out = []
    for req in REQUIREMENTS:
        seconds = measure(req, results)
        if seconds is None:
            out.append(StepResult(f"spec: {req.name}", True, 0.0, "not measured (its steps did not run)"))
            continue
        verdict = "within" if seconds < req.target_s else "OVER"
        out.append(
            StepResult(f"spec: {req.name}", True, seconds, f"{seconds:.2f} s, {verdict} {req.target_s:g} s")
        )
    return out


def run(scn: Scenario) -> None:
    scn.results.extend(rows(list(scn.results)))
